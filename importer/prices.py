"""Model prices, for transcripts that record tokens but no cost (Claude Code, Codex).

The table is an extract of LiteLLM's ``model_prices_and_context_window.json``, in its shape (one
object per model name with ``input_cost_per_token``, ``output_cost_per_token``,
``cache_read_input_token_cost``, ``cache_creation_input_token_cost``, ...), plus one key of ours,
``_agentbase``, that says when and from what it was taken. The packaged copy is
``importer/data/model_prices.json``; ``agentbase prices update --from FILE`` writes a fresh one to the
user's data folder (:func:`user_prices_path`), which then takes precedence.

Importers call::

    table = PriceTable.load()                      # once per run
    table = table.with_overrides(config_prices)    # the config file's prices: mapping, if any
    cost, cost_source = price_call(table, model, provider, usage, recorded_cost)

``cost_source`` is :data:`RECORDED` (the transcript's own cost, never replaced), :data:`COMPUTED`
(from the table) or :data:`UNPRICED` (cost ``None``: counted and flagged, never shown as $0).

The rules, and where they come from:

- Tiers above N input tokens (``*_above_200k_tokens``, also 128k, 272k, ... in LiteLLM's data):
  LiteLLM's ``_get_token_base_cost`` rule. The tier is chosen by the request's prompt tokens, which
  here are input + cache read + cache writes (Anthropic: "the 200K threshold is based solely on input
  tokens, including cache reads and writes"; Gemini and OpenAI count cached tokens in the prompt as
  well). A request is in the tier when that sum is strictly greater than N (so exactly 200,000 stays
  in the base tier); the highest tier exceeded wins, and then every token of the request, output and
  cache included, is charged at that tier's rate, each rate falling back to the base rate when the
  tier does not name it.
- Range tiers (``tiered_pricing``: Alibaba's Qwen models): LiteLLM's ``select_tier_for_input``; the
  tier with ``start < prompt tokens <= end`` prices the whole request, above the last range the last
  tier does, a request with no prompt tokens the first.
- Anthropic's 1-hour cache writes: ``cache_creation_input_token_cost_above_1hr`` (in a tier:
  ``cache_creation_input_token_cost_above_1hr_above_200k_tokens``) when the table has it, else 2x the
  input rate of the request's tier, Anthropic's documented multiplier (LiteLLM would fall back to the
  base 1-hour rate inside a tier, which undercharges).
- A cache read or 5-minute cache write rate the table does not give costs the input rate (a cached
  token the provider charged for is not free); a rate the table gives as 0 costs 0.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from datetime import date as _date, datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import orjson

RECORDED = "recorded"
COMPUTED = "computed"
UNPRICED = "unpriced"
COST_SOURCES = (RECORDED, COMPUTED, UNPRICED)

META_KEY = "_agentbase"
PACKAGED_PATH = Path(__file__).resolve().parent / "data" / "model_prices.json"
PRICES_FILE_NAME = "model_prices.json"
LITELLM_MEMBERS = ("model_prices_and_context_window_backup.json", "model_prices_and_context_window.json")

# The per-token rates a call is priced with, in LiteLLM's names.
INPUT = "input_cost_per_token"
OUTPUT = "output_cost_per_token"
CACHE_READ = "cache_read_input_token_cost"
CACHE_WRITE = "cache_creation_input_token_cost"
CACHE_WRITE_1H = "cache_creation_input_token_cost_above_1hr"
RATE_KEYS = (INPUT, OUTPUT, CACHE_READ, CACHE_WRITE, CACHE_WRITE_1H)
# A tier's rate: "<rate>_above_<N>k_tokens" (or "_above_<N>_tokens"). The longer name comes first,
# so "cache_creation_input_token_cost_above_1hr_above_200k_tokens" is the 1-hour rate's tier.
_TIER_KEY_RE = re.compile(
    r"^(cache_creation_input_token_cost_above_1hr|input_cost_per_token|output_cost_per_token"
    r"|cache_read_input_token_cost|cache_creation_input_token_cost)_above_(\d+)(k?)_tokens$")
_KEPT_KEYS = frozenset(RATE_KEYS) | {"litellm_provider", "mode", "max_input_tokens", "max_output_tokens"}
_KEPT_MODES = frozenset({"chat", "responses"})

# The providers whose own price lists are kept, by rank: 0 the model maker's own API, higher numbers
# only for model names that no lower rank prices (models a maker dropped from its list, such as
# claude-3-5-haiku, are still priced by the clouds that resell them at the maker's list price).
_PROVIDER_RANK = {
    "anthropic": 0, "openai": 0, "gemini": 0, "deepseek": 0, "moonshot": 0, "minimax": 0, "zai": 0,
    "dashscope": 0, "xai": 0, "mistral": 0, "codestral": 0,
    "bigmodel": 1,  # Zhipu's mainland site, prices converted from CNY: after z.ai
    "vertex_ai-language-models": 1, "vertex_ai": 2,  # Gemini models Google's own API no longer lists
    "bedrock": 1, "bedrock_converse": 1,  # only their plain anthropic.claude-* ids (see _rank)
    "vertex_ai-anthropic_models": 2,
}
# Providers that also resell other makers' models: only their own family counts as theirs.
_OWN_FAMILY = {
    "dashscope": re.compile(r"^(?:qwen|qwq)"),
    "mistral": re.compile(r"^(?!zai-|glm-|deepseek-|kimi-|minimax-)"),
    "vertex_ai-language-models": re.compile(r"^gemini-"),
    "vertex_ai": re.compile(r"^gemini-"),
}

# A snapshot's date (-20250929, -2025-08-07) or Vertex's version tag (@default).
_DATE_SUFFIX_RE = re.compile(r"(?:@[a-z0-9-]+|-20\d{6}|-20\d\d-\d\d-\d\d)$")
_BEDROCK_RE = re.compile(r"^(?:[a-z]{2,6}(?:-[a-z]+)?\.)?anthropic\.(claude-.+?)(?:-v\d+(?::\d+)?)?$")
_VERTEX_DATE_RE = re.compile(r"@(20\d{6})$")
_VERSION_DOT_RE = re.compile(r"(?<=\d)\.(?=\d)")
_ISO_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class PriceError(Exception):
    """A price table or override a user can fix; the message is one line."""


def normalise_model_name(name: str) -> str:
    """The name lookups compare: lower case, without provider prefixes (``openrouter/anthropic/``,
    ``vertex_ai/``, Bedrock's ``us.anthropic.`` and ``-v1:0``), without Claude Code's ``[1m]``, with
    dots between digits written as dashes (``claude-sonnet-4.5`` is ``claude-sonnet-4-5``, ``gpt-5.1``
    is ``gpt-5-1`` on both sides). Date suffixes and ``:tag`` suffixes stay: :meth:`PriceTable.lookup`
    drops them only when the name with them is not priced."""
    n = name.strip().lower()
    if n.endswith("[1m]"):
        n = n[:-4]
    n = n.rsplit("/", 1)[-1]
    m = _BEDROCK_RE.match(n)
    if m:
        n = m.group(1)
    n = _VERTEX_DATE_RE.sub(r"-\1", n)  # Vertex's claude-sonnet-4-5@20250929
    return _VERSION_DOT_RE.sub("-", n)


def _strip_date(n: str) -> str:
    return _DATE_SUFFIX_RE.sub("", n)


def _rank(key: str, entry: Mapping[str, Any]) -> int | None:
    provider = entry.get("litellm_provider")
    rank = _PROVIDER_RANK.get(provider) if isinstance(provider, str) else None
    if rank is None:
        return None
    tail = key.rsplit("/", 1)[-1].lower()
    if provider.startswith("bedrock"):  # the plain model id only: no region, no cross-region prefix
        return rank if "/" not in key and tail.startswith("anthropic.claude") else None
    family = _OWN_FAMILY.get(provider)
    if family is not None and not family.match(tail):
        return None
    if key.startswith("ft:"):  # fine-tuned variants: not a name a transcript uses
        return None
    return rank


def _rate(value: Any) -> float | None:
    """A per-token rate: a finite number >= 0 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _clean_range_tiers(raw: Any) -> list[dict] | None:
    if not isinstance(raw, list) or not raw:
        return None
    tiers = []
    for tier in raw:
        if not isinstance(tier, Mapping):
            return None
        rng = tier.get("range")
        if (not isinstance(rng, list) or len(rng) != 2 or _rate(rng[0]) is None or _rate(rng[1]) is None
                or _rate(tier.get(INPUT)) is None or _rate(tier.get(OUTPUT)) is None):
            return None
        clean = {k: tier[k] for k in RATE_KEYS if _rate(tier.get(k)) is not None}
        clean["range"] = list(rng)
        tiers.append(clean)
    return tiers


def _clean_entry(entry: Mapping[str, Any]) -> dict | None:
    """The keys of one model worth keeping, or None when it is not a priced chat model."""
    if entry.get("mode") not in _KEPT_MODES:
        return None
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key in _KEPT_KEYS:
            if key in RATE_KEYS:
                if _rate(value) is None:
                    continue
            out[key] = value
        elif _TIER_KEY_RE.match(key) and _rate(value) is not None:
            out[key] = value
    tiers = _clean_range_tiers(entry.get("tiered_pricing"))
    if tiers:
        out["tiered_pricing"] = tiers
    elif _rate(out.get(INPUT)) is None or _rate(out.get(OUTPUT)) is None:
        return None
    elif not out[INPUT] and not out[OUTPUT]:  # 0/0: free, or LiteLLM does not know the price
        return None
    return out


def extract_models(raw: Mapping[str, Any]) -> dict[str, dict]:
    """The priced chat models of a LiteLLM-shaped mapping worth keeping, in its order, under its
    names: the model makers' own APIs (Anthropic, OpenAI incl. gpt-5*/codex/o-series, Google Gemini,
    DeepSeek, Moonshot/Kimi, MiniMax, Zhipu/GLM, Qwen, xAI, Mistral), and the resellers' entries only
    for model names no maker lists any more. Each name (without its date suffix) keeps the entries of
    its best-ranked provider. Keys that are not model objects (``sample_spec``, ``_agentbase``) are
    skipped."""
    candidates: list[tuple[str, str, int, dict]] = []
    best: dict[str, int] = {}
    for key, entry in raw.items():
        if key == "sample_spec" or key.startswith("_") or not isinstance(entry, Mapping):
            continue
        rank = _rank(key, entry)
        if rank is None:
            continue
        clean = _clean_entry(entry)
        if clean is None:
            continue
        group = _strip_date(normalise_model_name(key))
        candidates.append((key, group, rank, clean))
        best[group] = min(rank, best.get(group, rank))
    out: dict[str, dict] = {}
    seen: set[str] = set()
    for key, group, rank, clean in candidates:
        name = normalise_model_name(key)
        if rank == best[group] and name not in seen:
            seen.add(name)
            out[key] = clean
    return out


@dataclass(frozen=True)
class Rates:
    """Per-token USD rates that price one request."""
    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float
    tier: str | None = None  # "above 200k input tokens", "above 32k up to 128k input tokens", ...


@dataclass(frozen=True)
class Price:
    """One model's prices. ``name`` is the table key it was found under, ``provider`` its
    ``litellm_provider`` (``"override"`` for a price from the config)."""
    name: str
    provider: str | None
    entry: Mapping[str, Any] = field(repr=False)

    @cached_property
    def _tiers(self) -> dict[int, str]:
        """Threshold -> the key suffix naming its rates (``_above_200k_tokens``)."""
        found: dict[int, str] = {}
        for key in self.entry:
            m = _TIER_KEY_RE.match(key)
            if m:
                found[int(m.group(2)) * (1000 if m.group(3) else 1)] = key[len(m.group(1)):]
        return found

    def thresholds(self) -> list[int]:
        """The prompt token counts above which another tier applies, highest first."""
        return sorted(self._tiers, reverse=True)

    def rates(self, prompt_tokens: int = 0) -> Rates:
        """The rates of a request with this many prompt tokens (input + cache read + cache writes)."""
        ranges = self.entry.get("tiered_pricing")
        if ranges:
            return self._range_rates(ranges, prompt_tokens)
        e = self.entry
        tiers = self._tiers
        above = [t for t in tiers if prompt_tokens > t]
        suffix = tiers[max(above)] if above else None

        def pick(key: str) -> float | None:  # the tier's rate, else the base rate, else None
            if suffix is not None and _rate(e.get(key + suffix)) is not None:
                return _rate(e.get(key + suffix))
            return _rate(e.get(key))

        inp = pick(INPUT)
        read = pick(CACHE_READ)
        write = pick(CACHE_WRITE)
        # 1-hour writes: the tier's own 1-hour rate, else (in a tier) 2x the tier's input rate
        write_1h = _rate(e.get(CACHE_WRITE_1H + suffix)) if suffix is not None else _rate(e.get(CACHE_WRITE_1H))
        return Rates(
            input=inp,
            output=pick(OUTPUT),
            cache_read=inp if read is None else read,
            cache_write_5m=inp if write is None else write,
            cache_write_1h=2.0 * inp if write_1h is None else write_1h,
            tier=f"above {_k(max(above))} input tokens" if above else None,
        )

    def _range_rates(self, ranges: list[dict], prompt_tokens: int) -> Rates:
        ordered = sorted(ranges, key=lambda t: t["range"][0])
        chosen = ordered[0] if prompt_tokens <= 0 else ordered[-1]
        if prompt_tokens > 0:
            for t in ordered:
                if t["range"][0] < prompt_tokens <= t["range"][1]:
                    chosen = t
                    break
        inp = float(chosen[INPUT])
        lo, hi = (int(x) for x in chosen["range"])
        return Rates(
            input=inp,
            output=float(chosen[OUTPUT]),
            cache_read=float(chosen.get(CACHE_READ, inp)),
            cache_write_5m=float(chosen.get(CACHE_WRITE, inp)),
            cache_write_1h=float(chosen.get(CACHE_WRITE_1H, 2.0 * inp)),
            tier=f"above {_k(lo)} up to {_k(hi)} input tokens" if len(ordered) > 1 else None,
        )

    def cost(self, input: int = 0, output: int = 0, cache_read: int = 0, cache_write_5m: int = 0,
             cache_write_1h: int = 0) -> float:
        """USD for one request. ``input`` excludes cached tokens (Anthropic's ``input_tokens``;
        for OpenAI/Codex ``input_tokens - cached_input_tokens``); ``output`` includes reasoning
        tokens; ``cache_write_5m``/``cache_write_1h`` are Anthropic's 5-minute and 1-hour cache
        writes (all of ``cache_creation_input_tokens`` is 5-minute when the split is unknown)."""
        counts = (input, output, cache_read, cache_write_5m, cache_write_1h)
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
            raise ValueError(f"token counts must be integers >= 0, got {counts}")
        r = self.rates(input + cache_read + cache_write_5m + cache_write_1h)
        return (input * r.input + output * r.output + cache_read * r.cache_read
                + cache_write_5m * r.cache_write_5m + cache_write_1h * r.cache_write_1h)


def _k(n: int) -> str:
    return f"{n // 1000}k" if n and n % 1000 == 0 else str(n)


class PriceTable:
    """A loaded price table: ``date`` (YYYY-MM-DD or None), ``source`` (what it was taken from),
    ``path`` (the file, or None), ``models`` (the entries, by table key)."""

    def __init__(self, models: dict[str, dict], date: str | None = None, source: Mapping | None = None,
                 path: Path | None = None, overrides: Mapping[str, Price] | None = None):
        self.models = models
        self.date = date
        self.source = dict(source or {})
        self.path = path
        self._overrides = dict(overrides or {})  # normalised name -> Price
        self._index: dict[str, list[Price]] = {}  # normalised name -> prices, best first
        self._undated: dict[str, tuple[str, Price]] = {}  # name without date -> (dated name, price)
        self._cache: dict[tuple, Price | None] = {}  # (model, provider) -> lookup's answer
        for key, entry in models.items():
            price = Price(key, entry.get("litellm_provider"), entry)
            name = normalise_model_name(key)
            self._index.setdefault(name, []).append(price)
            base = _strip_date(name)
            if base != name and (base not in self._undated or name > self._undated[base][0]):
                self._undated[base] = (name, price)  # the latest dated snapshot

    def __len__(self) -> int:
        return len(self.models)

    @classmethod
    def from_data(cls, data: Any, path: Path | None = None) -> "PriceTable":
        """A table from a parsed LiteLLM-shaped mapping (an extract of ours, or LiteLLM's whole file)."""
        if not isinstance(data, Mapping):
            raise PriceError(f"{path or 'price table'}: expected a JSON object of models")
        meta = data.get(META_KEY)
        meta = meta if isinstance(meta, Mapping) else {}
        day = meta.get("date")
        day = day if isinstance(day, str) and _ISO_DATE_RE.match(day) else None
        source = meta.get("source") if isinstance(meta.get("source"), Mapping) else {}
        return cls(extract_models(data), date=day, source=source, path=path)

    @classmethod
    def load(cls, path: str | os.PathLike | None = None) -> "PriceTable":
        """The table in ``path``; without one, the user's (:func:`user_prices_path`, written by
        ``agentbase prices update``) when there is one, else the packaged one."""
        path = _table_path(path)
        return cls.from_data(_read_json(path), path=path)

    def lookup(self, model: str | None, provider: str | None = None) -> Price | None:
        """The price of ``model`` (as a transcript names it), or None when the table has none.

        Tried in order, overrides first: the normalised name, then without its date suffix
        (``-20250929``, ``@20250514``, ``-2025-08-07``), then the latest dated entry of the undated
        name, then the same without a ``:tag`` suffix (``kimi-k2.5:cloud``; never ``:free``, which is a
        different price). Nothing else: no prefix or fuzzy matching, so an unknown model, or one of a
        family the table does not price, is None. ``provider``, when given, only breaks ties
        between entries of one name."""
        if not isinstance(model, str) or not model.strip():
            return None
        key = (model, provider)
        if key not in self._cache:
            self._cache[key] = self._lookup(model, provider)
        return self._cache[key]

    def _lookup(self, model: str, provider: str | None) -> Price | None:
        names = [normalise_model_name(model)]
        head, sep, tag = names[0].rpartition(":")
        if sep and head and tag != "free":
            names.append(head)
        candidates = []
        for n in names:
            candidates += [n, _strip_date(n)]
        for n in candidates:
            if n in self._overrides:
                return self._overrides[n]
        for n in names:
            for c in (n, _strip_date(n)):
                prices = self._index.get(c)
                if prices:
                    if provider:
                        for p in prices:
                            if p.provider == provider:
                                return p
                    return prices[0]
            dated = self._undated.get(_strip_date(n))
            if dated:
                return dated[1]
        return None

    def with_overrides(self, overrides: Mapping[str, Mapping[str, float]]) -> "PriceTable":
        """A copy whose prices for these models are replaced: ``{model: {input_cost_per_token: ...,
        ...}}`` (what :func:`parse_price_overrides` returns). For a model the table prices, the keys
        given replace its own and the rest stay; another model (or one priced by input ranges) needs at
        least input_cost_per_token and output_cost_per_token. An override applies to the model's dated
        names too. Raises :class:`PriceError` (one line)."""
        merged = dict(self._overrides)
        for model, rates in overrides.items():
            base = self.lookup(model)
            entry = dict(base.entry) if base is not None else {}
            ranged = entry.pop("tiered_pricing", None) is not None  # an override replaces ranged prices
            entry.update(rates)
            if _rate(entry.get(INPUT)) is None or _rate(entry.get(OUTPUT)) is None:
                why = "its table prices are by input range" if ranged else "it is not in the price table"
                raise PriceError(f"prices.{model}: give at least {INPUT} and {OUTPUT} ({why})")
            merged[normalise_model_name(model)] = Price(model, "override", entry)
        return PriceTable(self.models, date=self.date, source=self.source, path=self.path, overrides=merged)

    def describe_source(self) -> str:
        """One line: what the table was taken from."""
        s = self.source
        parts = [f"LiteLLM {s['litellm_version']}" if s.get("litellm_version") else str(s.get("file") or "")]
        if s.get("sha256"):
            parts.append(f"sha256 {str(s['sha256'])[:12]}")
        return ", ".join(p for p in parts if p) or "unknown source"


def price_call(table: PriceTable, model: str | None, provider: str | None, usage: Mapping[str, int],
               recorded_cost: float | None) -> tuple[float | None, str]:
    """``(cost, cost_source)`` of one model call.

    ``usage`` has the token counts of :meth:`Price.cost`: ``input``, ``output``, ``cache_read``,
    ``cache_write_5m``, ``cache_write_1h`` (missing ones are 0). ``recorded_cost`` is the cost the
    transcript carries (OpenClaw's and pi's ``usage.cost.total``, older Claude Code's ``costUSD``), or
    None when it has none.

    - A recorded cost is never replaced: > 0 is kept (``recorded``); 0 for a call without tokens is
      kept too. A recorded 0 with tokens is ``unpriced`` with cost None, also when the table prices
      the model: OpenClaw writes 0 for free, local and unknown models alike, and the table cannot tell
      which. A negative or non-finite recorded cost is ``unpriced``.
    - Without a recorded cost: a call without tokens costs 0 (``computed``, whatever the model,
      e.g. Claude Code's ``<synthetic>`` messages); otherwise the table's price (``computed``), and
      when the table has none, ``unpriced`` with cost None.
    """
    unknown = set(usage) - {"input", "output", "cache_read", "cache_write_5m", "cache_write_1h"}
    if unknown:
        raise ValueError(f"unknown usage keys: {sorted(unknown)}")
    counts = {k: int(usage.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write_5m",
                                                   "cache_write_1h")}
    tokens = sum(counts.values())
    if recorded_cost is not None:
        cost = _rate(recorded_cost)
        if cost is None:
            return None, UNPRICED
        if cost > 0 or tokens == 0:
            return cost, RECORDED
        return None, UNPRICED
    if tokens == 0:
        return 0.0, COMPUTED
    price = table.lookup(model, provider)
    if price is None:
        return None, UNPRICED
    return price.cost(**counts), COMPUTED


_current: PriceTable | None = None
_read: tuple[Any, Path] | None = None  # (the parsed table, its path): read by configure, not yet a table


def current() -> PriceTable:
    """The table imports price calls with (loaded once): the user's or the
    packaged one, with the config file's overrides (:func:`configure`)."""
    global _current, _read
    if _current is None:
        if _read is not None:
            data, path = _read
            _current, _read = PriceTable.from_data(data, path=path), None
        else:
            _current = PriceTable.load()
    return _current


def configure(overrides: Mapping[str, Mapping[str, float]] | None) -> None:
    """Use the config file's ``prices:`` overrides from now on (None: none). The table is read and
    checked now (a broken one is an error before any work); without overrides its models are
    indexed at the first call priced: a run with nothing new prices none (the index was 120M
    instructions, a sixth of such a run)."""
    global _current, _read
    if overrides:
        _current, _read = PriceTable.load().with_overrides(overrides), None
        return
    path = _table_path(None)
    data = _read_json(path)
    if not isinstance(data, Mapping):
        raise PriceError(f"{path}: expected a JSON object of models")
    _current, _read = None, (data, path)


def _table_path(path: str | os.PathLike | None) -> Path:
    """``path``; without one, the user's table when there is one, else the packaged one."""
    if path is None:
        user = user_prices_path()
        path = user if user.is_file() else PACKAGED_PATH
    return Path(path)


def parse_price_overrides(data: Any, where: str = "prices") -> dict[str, dict[str, float]]:
    """The config file's ``prices:`` mapping, checked: ``{model: {rate key: USD per token}}`` with
    the rate keys of LiteLLM's table (``input_cost_per_token``, ``output_cost_per_token``,
    ``cache_read_input_token_cost``, ``cache_creation_input_token_cost``,
    ``cache_creation_input_token_cost_above_1hr`` and their ``*_above_200k_tokens`` forms). Numbers
    may be written as strings (PyYAML reads ``3e-06`` as one). Raises :class:`PriceError` with a
    one-line message naming the bad key (the config file's reader makes it a ``ConfigError``)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise PriceError(f"{where}: expected a mapping of model names to prices, e.g. "
                          f"{{claude-sonnet-4-5: {{{INPUT}: 3.0e-06}}}}")
    out: dict[str, dict[str, float]] = {}
    seen: dict[str, str] = {}
    for model, rates in data.items():
        if not isinstance(model, str) or not model.strip():
            raise PriceError(f"{where}: model names must be non-empty strings, got {model!r}")
        at = f"{where}.{model}"
        norm = normalise_model_name(model)
        if norm in seen:
            raise PriceError(f"{at}: the same model as {seen[norm]!r}")
        seen[norm] = model
        if not isinstance(rates, Mapping) or not rates:
            raise PriceError(f"{at}: expected a mapping of rates, e.g. {{{INPUT}: 3.0e-06, {OUTPUT}: 1.5e-05}}")
        parsed: dict[str, float] = {}
        for key, value in rates.items():
            if not isinstance(key, str) or not (key in RATE_KEYS or _TIER_KEY_RE.match(key)):
                raise PriceError(f"{at}: unknown key {key!r} (known: {', '.join(RATE_KEYS)}, "
                                  "and their _above_200k_tokens forms)")
            number = value
            if isinstance(value, str):
                try:
                    number = float(value.strip())
                except ValueError:
                    number = None
            rate = _rate(number)
            if rate is None:
                raise PriceError(f"{at}.{key}: expected a number of USD per token >= 0 (e.g. 3.0e-06), "
                                  f"got {value!r}")
            parsed[key] = rate
        out[model] = parsed
    return out


# --- the files ---------------------------------------------------------------------------------

def user_prices_path() -> Path:
    """``$AGENTBASE_HOME/model_prices.json``, else ``~/.local/share/agentbase/model_prices.json``
    (beside the embedded store, :func:`importer.store.default_db_path`)."""
    from .store import default_db_path

    return default_db_path().parent / PRICES_FILE_NAME


def _read_json(path: Path) -> Any:
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise PriceError(f"cannot read {path}: {exc.strerror or exc}") from None
    return _parse_json(text, path)


def _parse_json(text: bytes, where: Any) -> Any:
    try:
        return orjson.loads(text)  # (a tenth of json's instructions for the packaged table: every import reads it)
    except orjson.JSONDecodeError:
        pass  # json's answer and its words for what is wrong (it also reads UTF-16, NaN, ...)
    try:
        return json.loads(text)
    except UnicodeDecodeError:
        raise PriceError(f"{where}: not a JSON file (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise PriceError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def read_source(path: str | os.PathLike) -> tuple[dict, dict]:
    """``(raw table, source)`` from LiteLLM's JSON file, or from a litellm wheel (``pip download
    --no-deps litellm``), whose ``litellm/model_prices_and_context_window_backup.json`` is read."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise PriceError(f"cannot read {path}: {exc.strerror or exc}") from None
    source: dict[str, Any] = {"file": path.name}
    if blob[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as wheel:
                members = [n for n in wheel.namelist() if n.rsplit("/", 1)[-1] in LITELLM_MEMBERS]
                members.sort(key=lambda n: LITELLM_MEMBERS.index(n.rsplit("/", 1)[-1]))
                if not members:
                    raise PriceError(f"{path}: a zip file without LiteLLM's {LITELLM_MEMBERS[0]}")
                blob = wheel.read(members[0])
                source["file"] = f"{path.name}:{members[0]}"
        except zipfile.BadZipFile:
            raise PriceError(f"{path}: not a readable wheel (bad zip file)") from None
        m = re.match(r"^litellm-(\d[^-]*)-", path.name)
        if m:
            source["litellm_version"] = m.group(1)
    source["sha256"] = hashlib.sha256(blob).hexdigest()
    raw = _parse_json(blob, path)
    if not isinstance(raw, dict):
        raise PriceError(f"{path}: expected a JSON object of models (LiteLLM's model_prices_and_context_window.json)")
    old_meta = raw.get(META_KEY)
    if isinstance(old_meta, Mapping) and isinstance(old_meta.get("source"), Mapping):
        source = {**old_meta["source"], "refreshed_from": source["file"]}  # an extract of ours again
    return raw, source


def build_table(raw: Mapping[str, Any], day: str, source: Mapping[str, Any]) -> dict:
    """The file to write: ``_agentbase`` (date, source, counts) first, then the extract."""
    models = extract_models(raw)
    if not models:
        raise PriceError("no priced chat models of the supported providers in it "
                         "(is it LiteLLM's model_prices_and_context_window.json?)")
    meta = {
        "date": day,
        "source": dict(source),
        "models": len(models),
        "models_in_source": sum(1 for k, v in raw.items() if isinstance(v, Mapping) and not k.startswith("_")
                                and k != "sample_spec"),
        "note": "An extract of LiteLLM's model_prices_and_context_window.json (USD per token) made by "
                "AgentBase (importer/prices.py); refresh with `agentbase prices update --from FILE`.",
    }
    return {META_KEY: meta, **models}


def write_table(data: Mapping, dest: Path) -> None:
    """Write atomically: a reader sees the old file or the new one."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".model_prices.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def update_prices(source_path: str | os.PathLike, dest: str | os.PathLike | None = None,
                  day: str | None = None) -> tuple[PriceTable | None, PriceTable]:
    """Refresh the table from LiteLLM's file (or a litellm wheel) into ``dest`` (default: the user's
    :func:`user_prices_path`). ``day`` is the table's date, YYYY-MM-DD; by default the day the source
    file was last written (the day it was fetched). Returns ``(old, new)``; ``old`` is the table
    loads used before (None if it was unreadable). On any problem raises :class:`PriceError` and
    leaves ``dest`` as it was."""
    dest = Path(dest) if dest is not None else user_prices_path()
    if day is not None:
        try:
            _date.fromisoformat(day)
        except ValueError:
            raise PriceError(f"--date {day!r}: expected a date as YYYY-MM-DD") from None
        if not _ISO_DATE_RE.match(day):
            raise PriceError(f"--date {day!r}: expected a date as YYYY-MM-DD")
    raw, source = read_source(source_path)
    if day is None:
        mtime = Path(source_path).stat().st_mtime
        day = datetime.fromtimestamp(mtime, timezone.utc).date().isoformat()
    try:
        data = build_table(raw, day, source)
    except PriceError as exc:
        raise PriceError(f"{source_path}: {exc}") from None
    try:
        old = PriceTable.load(dest if dest.is_file() else None)
    except PriceError:
        old = None
    write_table(data, dest)
    return old, PriceTable.from_data(data, path=dest)
