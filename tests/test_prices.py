"""The model price table (importer/prices.py) and `agentbase prices`.

Costs are checked against sums written out here from the table's own per-token numbers, read
straight from the packaged JSON file, so the tests do not just repeat the module's arithmetic."""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from importer import prices
from importer.cli import cli
from importer.config import ConfigError, parse_config
from importer.prices import (COMPUTED, RECORDED, UNPRICED, PACKAGED_PATH, PriceError, PriceTable,
                             parse_price_overrides, price_call)

REPO = Path(__file__).resolve().parent.parent
RAW = json.loads(PACKAGED_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return PriceTable.load(PACKAGED_PATH)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty $AGENTBASE_HOME: no user table, so the packaged one is used."""
    monkeypatch.setenv("AGENTBASE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def entry(key: str) -> dict:
    return RAW[key]


# --- the packaged file ---------------------------------------------------------------------------

def test_packaged_file_is_a_dated_modest_litellm_extract(table):
    assert PACKAGED_PATH.stat().st_size < 300_000
    meta = RAW["_agentbase"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", meta["date"]) and table.date == meta["date"]
    assert re.fullmatch(r"[0-9a-f]{64}", meta["source"]["sha256"])
    assert meta["source"]["litellm_version"]
    models = {k: v for k, v in RAW.items() if k != "_agentbase"}
    assert len(table) == len(models) == meta["models"] > 200
    for key, value in models.items():  # LiteLLM's shape, chat models only
        assert value["mode"] in ("chat", "responses"), key
        assert "input_cost_per_token" in value or "tiered_pricing" in value, key
        assert value["litellm_provider"], key
    assert not any(k.startswith(("azure/", "azure_ai/", "openrouter/", "fireworks_ai/")) for k in models)
    assert '"data/*.json"' in (REPO / "setup.py").read_text()


def test_loader_skips_non_model_keys():
    data = {"sample_spec": {"mode": "chat", "input_cost_per_token": 0.0, "litellm_provider": "openai"},
            "_agentbase": {"date": "2026-01-02", "source": {"file": "x.json"}},
            "gpt-5": {"mode": "chat", "litellm_provider": "openai", "input_cost_per_token": 1e-06,
                      "output_cost_per_token": 2e-06}}
    t = PriceTable.from_data(data)
    assert len(t) == 1 and t.date == "2026-01-02" and t.lookup("gpt-5").name == "gpt-5"


# --- lookup ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("model, key", [
    ("claude-opus-4-5-20251101", "claude-opus-4-5-20251101"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
    ("claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("claude-sonnet-4.5", "claude-sonnet-4-5"),
    ("Claude-Sonnet-4-5", "claude-sonnet-4-5"),
    ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5-20250929"),
    ("claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4-5-20250929"),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
    ("claude-opus-4-6-20991231", "claude-opus-4-6"),  # an unlisted snapshot of a priced model
    # Anthropic no longer lists Haiku 3.5; Bedrock's plain id carries Anthropic's list price
    ("claude-3-5-haiku-20241022", "anthropic.claude-3-5-haiku-20241022-v1:0"),
    ("claude-3-5-haiku", "anthropic.claude-3-5-haiku-20241022-v1:0"),
    ("claude-opus-4.8", "claude-opus-4-8"),  # in this table, so priced
    ("gpt-5", "gpt-5"),
    ("gpt-5-codex", "gpt-5-codex"),
    ("gpt-5.1-codex-max", "gpt-5.1-codex-max"),
    ("openai/gpt-5.1-codex-max", "gpt-5.1-codex-max"),
    ("gpt-5.2-2025-12-11", "gpt-5.2-2025-12-11"),
    ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),  # a snapshot priced apart from gpt-4o keeps its price
    ("o3", "o3"),
    ("kimi-k2.5:cloud", "moonshot/kimi-k2.5"),
    ("kimi-k2.5", "moonshot/kimi-k2.5"),
    ("MiniMax-M2.5", "minimax/MiniMax-M2.5"),
    ("gemini-2.5-pro", "gemini/gemini-2.5-pro"),
    ("models/gemini-2.5-pro", "gemini/gemini-2.5-pro"),
    ("glm-4.6", "zai/glm-4.6"),
    ("qwen3-coder-plus", "dashscope/qwen3-coder-plus"),
    ("deepseek-chat", "deepseek-chat"),
    ("grok-code-fast-1", "xai/grok-code-fast-1"),
])
def test_lookup_matches_by_normalised_name(table, model, key):
    price = table.lookup(model)
    assert price is not None, model
    assert price.name == key


@pytest.mark.parametrize("model", [
    "<synthetic>", "", None, "   ",
    "MiniMax-M2.7",  # MiniMax's own list has no M2.7 here; resellers' prices are not borrowed
    "claude-opus-4-9", "claude-sonnet-4-5-foo", "claude-sonnet", "claude",
    "gpt-5.1-codex-maxx", "gpt-5-codex-mini", "gpt-6", "o3-mini-high",
    "deepseek/deepseek-r1:free",  # :free is another price, not a local tag
    "gpt-oss:120b", "llama3.1:8b", "kimi-k9:cloud",
])
def test_lookup_never_guesses(table, model):
    assert table.lookup(model) is None


def test_provider_only_breaks_ties(table):
    assert table.lookup("claude-sonnet-4-5", provider="openrouter").name == "claude-sonnet-4-5"
    assert table.lookup("no-such-model", provider="anthropic") is None


# --- costs ---------------------------------------------------------------------------------------

def test_cost_by_hand(table):
    e = entry("claude-sonnet-4-5-20250929")
    by_hand = (1_000 * e["input_cost_per_token"] + 2_000 * e["output_cost_per_token"]
               + 30_000 * e["cache_read_input_token_cost"] + 4_000 * e["cache_creation_input_token_cost"])
    got = table.lookup("claude-sonnet-4-5-20250929").cost(input=1_000, output=2_000, cache_read=30_000,
                                                         cache_write_5m=4_000)
    assert got == pytest.approx(by_hand, rel=1e-12)
    assert got == pytest.approx(0.003 + 0.03 + 0.009 + 0.015, rel=1e-12)  # $3/$15/$0.30/$3.75 per Mtok

    e = entry("gpt-5.1-codex-max")  # Codex: input without its cached part, output with reasoning
    got = table.lookup("gpt-5.1-codex-max").cost(input=12_345, output=678, cache_read=90_000)
    assert got == pytest.approx(12_345 * e["input_cost_per_token"] + 678 * e["output_cost_per_token"]
                                + 90_000 * e["cache_read_input_token_cost"], rel=1e-12)
    assert table.lookup("o3").cost() == 0.0


def test_one_hour_cache_writes(table):
    e = entry("claude-opus-4-5-20251101")  # the table's own 1-hour rate
    got = table.lookup("claude-opus-4-5-20251101").cost(cache_write_5m=10_000, cache_write_1h=20_000)
    assert got == pytest.approx(10_000 * e["cache_creation_input_token_cost"]
                                + 20_000 * e["cache_creation_input_token_cost_above_1hr"], rel=1e-12)
    e = entry("anthropic.claude-3-5-haiku-20241022-v1:0")  # no 1-hour rate: 2x input
    assert "cache_creation_input_token_cost_above_1hr" not in e
    got = table.lookup("claude-3-5-haiku-20241022").cost(cache_write_1h=20_000)
    assert got == pytest.approx(20_000 * 2 * e["input_cost_per_token"], rel=1e-12)


def test_200k_tier_from_the_table(table):
    e = entry("gemini/gemini-2.5-pro")
    price = table.lookup("gemini-2.5-pro")
    base = lambda i, o, cr: i * e["input_cost_per_token"] + o * e["output_cost_per_token"] + cr * e[
        "cache_read_input_token_cost"]
    high = lambda i, o, cr: (i * e["input_cost_per_token_above_200k_tokens"]
                             + o * e["output_cost_per_token_above_200k_tokens"]
                             + cr * e["cache_read_input_token_cost_above_200k_tokens"])
    # exactly 200,000 prompt tokens stay in the base tier; one more puts every token in the high one
    assert price.cost(input=200_000, output=1_000) == pytest.approx(base(200_000, 1_000, 0), rel=1e-12)
    assert price.cost(input=200_001, output=1_000) == pytest.approx(high(200_001, 1_000, 0), rel=1e-12)
    # cached tokens count towards the threshold; output does not
    assert price.cost(input=150_000, cache_read=50_001, output=5_000) == pytest.approx(
        high(150_000, 5_000, 50_001), rel=1e-12)
    assert price.cost(input=100_000, output=150_000) == pytest.approx(base(100_000, 150_000, 0), rel=1e-12)


ANTHROPIC_LIKE = {
    "model-a": {"mode": "chat", "litellm_provider": "anthropic",
                "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
                "cache_read_input_token_cost": 3e-07, "cache_creation_input_token_cost": 3.75e-06,
                "cache_creation_input_token_cost_above_1hr": 6e-06,
                "input_cost_per_token_above_200k_tokens": 6e-06,
                "output_cost_per_token_above_200k_tokens": 2.25e-05,
                "cache_read_input_token_cost_above_200k_tokens": 6e-07,
                "cache_creation_input_token_cost_above_200k_tokens": 7.5e-06,
                "cache_creation_input_token_cost_above_1hr_above_200k_tokens": 1.2e-05},
    "model-c": {"mode": "chat", "litellm_provider": "openai", "input_cost_per_token": 1e-06,
                "output_cost_per_token": 2e-06, "output_cost_per_token_above_1000_tokens": 4e-06},
    "model-b": {"mode": "chat", "litellm_provider": "anthropic",
                "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
                "cache_creation_input_token_cost_above_1hr": 6e-06,
                "input_cost_per_token_above_200k_tokens": 6e-06,
                "input_cost_per_token_above_128k_tokens": 4e-06},
}


def test_tier_rules_on_a_made_up_table():
    t = PriceTable.from_data(ANTHROPIC_LIKE)
    a = t.lookup("model-a")
    # cache writes push the prompt over 200k; every bucket then takes its tier rate
    got = a.cost(input=1_000, output=2_000, cache_read=100_000, cache_write_5m=50_000, cache_write_1h=49_001)
    assert got == pytest.approx(1_000 * 6e-06 + 2_000 * 2.25e-05 + 100_000 * 6e-07 + 50_000 * 7.5e-06
                                + 49_001 * 1.2e-05, rel=1e-12)
    got = a.cost(input=1_000, output=2_000, cache_read=100_000, cache_write_5m=50_000, cache_write_1h=49_000)
    assert got == pytest.approx(1_000 * 3e-06 + 2_000 * 1.5e-05 + 100_000 * 3e-07 + 50_000 * 3.75e-06
                                + 49_000 * 6e-06, rel=1e-12)
    b = t.lookup("model-b")
    # the highest threshold exceeded wins; rates the tier does not name stay at the base rate;
    # a missing cache read or 5-minute write rate is the input rate; in a tier without its own
    # 1-hour rate, 1-hour writes cost 2x the tier's input rate
    assert b.cost(input=150_000, output=10) == pytest.approx(150_000 * 4e-06 + 10 * 1.5e-05, rel=1e-12)
    assert b.cost(input=250_000, output=10, cache_write_1h=1_000, cache_read=7) == pytest.approx(
        250_000 * 6e-06 + 10 * 1.5e-05 + 1_000 * 2 * 6e-06 + 7 * 6e-06, rel=1e-12)
    assert b.cost(input=10, cache_write_1h=1_000) == pytest.approx(10 * 3e-06 + 1_000 * 6e-06, rel=1e-12)
    c = t.lookup("model-c")  # a threshold written without "k"; only the output rate changes
    assert c.cost(input=1_000, output=10) == pytest.approx(1_000 * 1e-06 + 10 * 2e-06, rel=1e-12)
    assert c.cost(input=1_001, output=10) == pytest.approx(1_001 * 1e-06 + 10 * 4e-06, rel=1e-12)
    with pytest.raises(ValueError):
        a.cost(input=-1)


def test_range_tiers_of_qwen(table):
    tiers = sorted(entry("dashscope/qwen3-coder-plus")["tiered_pricing"], key=lambda t: t["range"][0])
    price = table.lookup("qwen3-coder-plus")
    for prompt, tier in ((32_000, tiers[0]), (32_001, tiers[1]), (5_000_000, tiers[-1])):
        got = price.cost(input=prompt - 1_000, cache_read=1_000, output=500)
        assert got == pytest.approx((prompt - 1_000) * tier["input_cost_per_token"]
                                    + 1_000 * tier["cache_read_input_token_cost"]
                                    + 500 * tier["output_cost_per_token"], rel=1e-12), prompt


# --- overrides -----------------------------------------------------------------------------------

def test_overrides(table):
    e = entry("claude-sonnet-4-5")
    t = table.with_overrides({"claude-sonnet-4.5": {"input_cost_per_token": 1e-06},
                              "my-local-model": {"input_cost_per_token": 1e-07, "output_cost_per_token": 2e-07}})
    for name in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4.5"):
        price = t.lookup(name)
        assert price.provider == "override"
        assert price.cost(input=1_000, output=1_000) == pytest.approx(
            1_000 * 1e-06 + 1_000 * e["output_cost_per_token"], rel=1e-12)
    assert t.lookup("my-local-model:latest").cost(input=10, output=10) == pytest.approx(10 * 1e-07 + 10 * 2e-07)
    assert table.lookup("my-local-model") is None  # the original is unchanged
    assert table.lookup("claude-sonnet-4-5").provider == "anthropic"
    with pytest.raises(PriceError, match="not in the price table"):
        table.with_overrides({"my-local-model": {"input_cost_per_token": 1e-07}})
    with pytest.raises(PriceError, match="by input range"):
        table.with_overrides({"qwen3-coder-plus": {"cache_read_input_token_cost": 1e-07}})
    flat = table.with_overrides({"qwen3-coder-plus": {"input_cost_per_token": 1e-06, "output_cost_per_token": 5e-06}})
    assert flat.lookup("qwen3-coder-plus").cost(input=500_000, output=10) == pytest.approx(0.5 + 5e-05)


def test_parse_price_overrides():
    got = parse_price_overrides({"claude-sonnet-4-5": {"input_cost_per_token": "3e-06",
                                                       "output_cost_per_token": 1.5e-05,
                                                       "input_cost_per_token_above_200k_tokens": 0}},
                                "config.yml: prices")
    assert got == {"claude-sonnet-4-5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
                                         "input_cost_per_token_above_200k_tokens": 0.0}}
    assert parse_price_overrides(None, "prices") == {}
    bad = [
        (["gpt-5"], "expected a mapping"),
        ({"gpt-5": {"input_cost": 1e-06}}, r"prices\.gpt-5: unknown key 'input_cost'"),
        ({"gpt-5": {"input_cost_per_token": "cheap"}}, r"prices\.gpt-5\.input_cost_per_token: expected a number"),
        ({"gpt-5": {"input_cost_per_token": -1}}, "expected a number"),
        ({"gpt-5": {"input_cost_per_token": True}}, "expected a number"),
        ({"gpt-5": {"input_cost_per_token": float("nan")}}, "expected a number"),
        ({"gpt-5": 3}, "expected a mapping of rates"),
        ({"gpt-5": {}}, "expected a mapping of rates"),
        ({1: {"input_cost_per_token": 1e-06}}, "non-empty strings"),
        ({"gpt-5.1": {"input_cost_per_token": 1}, "gpt-5-1": {"input_cost_per_token": 1}}, "same model"),
    ]
    for data, message in bad:
        with pytest.raises(PriceError, match=message) as info:
            parse_price_overrides(data, "prices")
        assert "\n" not in str(info.value)
        # The config file's reader says it as a config error, the same line.
        with pytest.raises(ConfigError, match=message) as info:
            parse_config({"servers": [{"name": "here", "local": True}], "prices": data}, "config.yml")
        assert "\n" not in str(info.value) and str(info.value).startswith("config.yml: prices")


# --- cost_source -----------------------------------------------------------------------------------

def test_price_call_rules(table):
    usage = {"input": 100, "output": 50, "cache_read": 1_000, "cache_write_5m": 0}
    sonnet = table.lookup("claude-sonnet-4-5").cost(input=100, output=50, cache_read=1_000)
    # a recorded cost is kept as it is, never replaced
    assert price_call(table, "claude-sonnet-4-5", "anthropic", usage, 0.5) == (0.5, RECORDED)
    assert price_call(table, "no-such-model", None, usage, 0.01) == (0.01, RECORDED)
    # recorded 0 with tokens: free, local or unknown, the table cannot tell: unpriced, not $0
    assert price_call(table, "claude-sonnet-4-5", "anthropic", usage, 0.0) == (None, UNPRICED)
    assert price_call(table, "no-such-model", None, usage, 0) == (None, UNPRICED)
    assert price_call(table, "claude-sonnet-4-5", None, {}, 0.0) == (0.0, RECORDED)
    assert price_call(table, "claude-sonnet-4-5", None, usage, -1.0) == (None, UNPRICED)
    assert price_call(table, "claude-sonnet-4-5", None, usage, float("nan")) == (None, UNPRICED)
    # no recorded cost: computed from the table, else unpriced
    cost, source = price_call(table, "claude-sonnet-4-5-20250929", "anthropic", usage, None)
    assert source == COMPUTED and cost == pytest.approx(sonnet, rel=1e-12)
    assert price_call(table, "MiniMax-M2.7", "minimax", usage, None) == (None, UNPRICED)
    assert price_call(table, "<synthetic>", None, {"input": 0, "output": 0}, None) == (0.0, COMPUTED)
    with pytest.raises(ValueError, match="unknown usage keys"):
        price_call(table, "gpt-5", None, {"cacheRead": 3}, None)
    assert {RECORDED, COMPUTED, UNPRICED} == set(prices.COST_SOURCES)


# --- the files and the CLI -------------------------------------------------------------------------

GOOD_SOURCE = {
    "sample_spec": {"mode": "one of: chat, embedding", "input_cost_per_token": 0.0},
    "claude-sonnet-4-5": {"litellm_provider": "anthropic", "mode": "chat", "input_cost_per_token": 4e-06,
                          "output_cost_per_token": 2e-05, "cache_read_input_token_cost": 4e-07,
                          "cache_creation_input_token_cost": 5e-06, "supports_vision": True,
                          "input_cost_per_token_batches": 2e-06},
    "gpt-5": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1e-06,
              "output_cost_per_token": 8e-06},
    "text-embedding-3-small": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 2e-08,
                               "output_cost_per_token": 0.0},
    "azure/gpt-5": {"litellm_provider": "azure", "mode": "chat", "input_cost_per_token": 1e-06,
                    "output_cost_per_token": 8e-06},
    "free-model": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 0,
                   "output_cost_per_token": 0},
}


def run(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def test_update_from_a_good_file(home, tmp_path):
    src = tmp_path / "model_prices_and_context_window.json"
    src.write_text(json.dumps(GOOD_SOURCE))
    os.utime(src, (1767225600, 1767225600))  # 2026-01-01 UTC: the default date
    result = run("prices", "update", "--from", str(src))
    assert result.exit_code == 0, result.output
    user = home / "model_prices.json"
    assert user.is_file()
    assert f"old: {PriceTable.load(PACKAGED_PATH).date}, {len(PriceTable.load(PACKAGED_PATH))} models" in result.stdout
    assert "new: 2026-01-01, 2 models" in result.stdout
    data = json.loads(user.read_text())
    assert data["_agentbase"]["date"] == "2026-01-01"
    assert data["_agentbase"]["models_in_source"] == 5
    assert set(data) == {"_agentbase", "claude-sonnet-4-5", "gpt-5"}
    assert "supports_vision" not in data["claude-sonnet-4-5"]
    # it now takes precedence over the packaged table
    t = PriceTable.load()
    assert t.path == user and t.date == "2026-01-01"
    assert t.lookup("claude-sonnet-4-5-20250929").cost(input=1_000_000) == pytest.approx(4.0)
    assert t.lookup("claude-opus-4-5") is None
    shown = run("prices", "show")
    assert shown.exit_code == 0 and "2026-01-01, 2 models" in shown.stdout and "yours" in shown.stdout
    assert "newer than yours" in shown.stderr  # the packaged table is dated later
    again = run("prices", "update", "--from", str(src), "--date", "2026-02-03")
    assert "old: 2026-01-01, 2 models" in again.stdout and "new: 2026-02-03, 2 models" in again.stdout


def test_update_from_a_wheel(home, tmp_path):
    wheel = tmp_path / "litellm-9.8.7-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("litellm/__init__.py", "")
        z.writestr("litellm/model_prices_and_context_window_backup.json", json.dumps(GOOD_SOURCE))
    result = run("prices", "update", "--from", str(wheel), "--date", "2026-03-04")
    assert result.exit_code == 0, result.output
    assert "new: 2026-03-04, 2 models (LiteLLM 9.8.7, sha256 " in result.stdout
    assert PriceTable.load().source["litellm_version"] == "9.8.7"


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"sample_spec": {}, "text-embedding-3-small": {"litellm_provider": "openai", "mode": "embedding"}}',
     "no priced chat models"),
    ("{}", "no priced chat models"),
    ("[1, 2]", "expected a JSON object"),
    (b"\x80\x81garbage", "not a JSON file"),
])
def test_update_from_a_bad_file_leaves_the_table(home, tmp_path, content, message):
    src = tmp_path / "prices.json"
    (src.write_bytes if isinstance(content, bytes) else src.write_text)(content)
    result = run("prices", "update", "--from", str(src))
    assert message in one_line_error(result)
    assert not (home / "model_prices.json").exists()
    # with a table of the user's already there, it stays byte for byte
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD_SOURCE))
    assert run("prices", "update", "--from", str(good), "--date", "2026-01-01").exit_code == 0
    before = (home / "model_prices.json").read_bytes()
    assert message in one_line_error(run("prices", "update", "--from", str(src)))
    assert (home / "model_prices.json").read_bytes() == before
    assert sorted(p.name for p in home.iterdir()) == ["model_prices.json"]  # no temporary file left


def test_update_errors(home, tmp_path):
    assert "cannot read" in one_line_error(run("prices", "update", "--from", str(tmp_path / "missing.json")))
    src = tmp_path / "p.json"
    src.write_text(json.dumps(GOOD_SOURCE))
    assert "YYYY-MM-DD" in one_line_error(run("prices", "update", "--from", str(src), "--date", "2026-13-01"))
    notwheel = tmp_path / "litellm-1.0-py3-none-any.whl"
    with zipfile.ZipFile(notwheel, "w") as z:
        z.writestr("litellm/__init__.py", "")
    assert "without LiteLLM's" in one_line_error(run("prices", "update", "--from", str(notwheel)))
    assert not (home / "model_prices.json").exists()


def test_broken_user_table_is_a_one_line_error(home):
    home.mkdir(parents=True)
    (home / "model_prices.json").write_text("{oops")
    assert "not valid JSON" in one_line_error(run("prices", "show"))
    with pytest.raises(PriceError):
        PriceTable.load()


def test_show(home, table):
    result = run("prices", "show")
    assert result.exit_code == 0, result.output
    assert f"price table: {table.date}, {len(table)} models (LiteLLM {RAW['_agentbase']['source']['litellm_version']}" \
        in result.stdout
    assert "(packaged)" in result.stdout
    result = run("prices", "show", "claude-opus-4-5-20251101")
    assert result.exit_code == 0, result.output
    assert "matched claude-opus-4-5-20251101 (anthropic)" in result.stdout
    e = entry("claude-opus-4-5-20251101")
    row = [line for line in result.stdout.splitlines() if "all requests" in line][0]
    assert row.split()[2:] == [f"${e['input_cost_per_token'] * 1e6:.2f}", f"${e['output_cost_per_token'] * 1e6:.2f}",
                               f"${e['cache_read_input_token_cost'] * 1e6:.2f}",
                               f"${e['cache_creation_input_token_cost'] * 1e6:.2f}",
                               f"${e['cache_creation_input_token_cost_above_1hr'] * 1e6:.2f}"]
    tiered = run("prices", "show", "gemini-2.5-pro").stdout
    assert "up to 200k" in tiered and "above 200k" in tiered
    assert "not in the price table" in one_line_error(run("prices", "show", "MiniMax-M2.7"))
