"""Credentials out of the snapshot: every value recognised anywhere becomes
``[REDACTED:<kind>]`` everywhere.

Transcripts hold live credentials (API keys pasted in chat, tokens printed by
tools, passwords in command lines). The store keeps everything as it was
written; the snapshot Datasette serves must not show a single one of them.

Three parts, one design:

:class:`Detector` finds credential *values* (each with a kind) in one string
as a reader sees it: JSON columns are decoded first and every string in them
scanned (with its key as context: ``"api_key": "..."``), never the escaped
serialisation. What it recognises: detect-secrets' plugin patterns (AWS,
Azure, basic auth, Discord, GitHub, GitLab, JWT, Mailchimp, npm, OpenAI,
private keys, PyPI, SendGrid, Slack, Square, Stripe, Telegram, Twilio,
Artifactory) with each token taken whole, other providers' key formats,
``NAME=value`` / ``"name": "value"`` / ``--flag value`` / ``password is
X`` forms around a credential word in English, Chinese, Japanese and Korean
(an entropy test where only a space separates them), command lines (``mysql
-p``, ``docker login -p``, ``sshpass -p``, ``curl -u user:pass``, ``redis-cli
-a``, and issue 22's: ``mongosh -p``, ``sqlcmd -P``, ``smbclient -U u%pw``,
``htpasswd -b``, ``-passout pass:``, ``keytool -storepass``, ``ldapsearch -w``,
``zip -P``, ``7z -p``, ``| sudo -S``, ``net use``, ``lftp -u u,pw``), ODBC
``Pwd=``, Azure ``sig=`` / ``code=``, webhooks (Discord, Feishu, WeCom), Sentry
DSNs, Vault, STS and age tokens, ``_auth`` / Docker ``auth``, any ``FOO_KEY``
with a random value, ``Cookie:`` headers, URL passwords (an ``@``, ``#`` or
``/`` inside one too), ``.pgpass`` lines and PEM blocks (encrypted, PuTTY v3,
numbered lines). A string is also read with its backslash escapes, ``%XX``
escapes (twice encoded too) and plausible base64 runs decoded, with the
pieces a concatenation, a shell continuation or a terminal's wrap cut joined,
and adjacent text blocks are read as one text (a key split across two
blocks); a path's names are also read as Claude Code mangles them.

:class:`SecretSet` holds every credential-shaped value found anywhere in the
store (never a key name, a word or a marker: :func:`credential_shaped`) and
replaces every occurrence of each, in any text: the value as written, with
any of its characters JSON-escaped (``\\"``, ``\\n``, ``\\u0041``, one or
two levels deep) or URL-encoded, its base64 encodings at the three byte
alignments, and the pieces of a value split across blocks. A text is read
for the values' anchors (the head and the tail of a run of letters and
digits of each value, which every form keeps) in two RE2 passes whose cost
does not grow with the number of values; each anchor found is then checked
against its values. So a value recognised in one message is gone from every
other one too ("the user pasted X" in a thinking block), including the
full-text index, file names, labels and model names. JSON columns are
decoded, their strings replaced and encoded again: they stay valid JSON.

:func:`collect` (pass 1) runs the detector over every column the export
reads for credentials (shape.redact_columns()) and returns the set; the export
then copies every row of every table through ``snapshot/redaction.py``'s
``redact_rows`` (pass 2). ``agentbase secrets`` (``scan_store`` there) runs the
same two passes without writing, so it reports exactly the counts the export
redacts. See docs/redaction.md.

Left alone: UUIDs, hex hashes, thinking and text signatures, base64 images
(``data`` of image blocks), ``${VAR}`` and ``<your key>`` placeholders, paths,
numbers, code names (``getPassword()``, ``settings.SECRET_KEY``) and prose.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import gc
import itertools
import json
import math
import operator
import re
import string
from collections import Counter, deque
from typing import Any, Iterable, Iterator

import orjson

try:
    import re2 as _re2
except Exception:  # not installed, or no build for this platform: Python's re does it, slower
    _re2 = None

REDACTED = "[REDACTED:{}]"
_MARK = "[REDACTED:"

# -- detect-secrets ------------------------------------------------------------

from detect_secrets.plugins.artifactory import ArtifactoryDetector  # noqa: E402
from detect_secrets.plugins.aws import AWSKeyDetector  # noqa: E402
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector  # noqa: E402
from detect_secrets.plugins.discord import DiscordBotTokenDetector  # noqa: E402
from detect_secrets.plugins.github_token import GitHubTokenDetector  # noqa: E402
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector  # noqa: E402
from detect_secrets.plugins.jwt import JwtTokenDetector  # noqa: E402
from detect_secrets.plugins.keyword import DENYLIST as _DS_KEYWORDS  # noqa: E402
from detect_secrets.plugins.mailchimp import MailchimpDetector  # noqa: E402
from detect_secrets.plugins.npm import NpmDetector  # noqa: E402
from detect_secrets.plugins.openai import OpenAIDetector  # noqa: E402
from detect_secrets.plugins.private_key import PrivateKeyDetector  # noqa: E402
from detect_secrets.plugins.pypi_token import PypiTokenDetector  # noqa: E402
from detect_secrets.plugins.sendgrid import SendGridDetector  # noqa: E402
from detect_secrets.plugins.slack import SlackDetector  # noqa: E402
from detect_secrets.plugins.square_oauth import SquareOAuthDetector  # noqa: E402
from detect_secrets.plugins.stripe import StripeDetector  # noqa: E402
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector  # noqa: E402
from detect_secrets.plugins.twilio import TwilioKeyDetector  # noqa: E402


def _ds(plugin, i: int = 0) -> str:
    return plugin.denylist[i].pattern


# -- RE2, or re when it is missing -------------------------------------------------

def _compile(pattern: str, capture: bool = True, longest: bool = False):
    if _re2 is None:
        return re.compile(pattern)
    options = _re2.Options()
    options.max_mem = 512 << 20
    options.never_capture = not capture
    options.longest_match = longest  # any match will do: a simpler automaton
    return _re2.compile(pattern, options)


class _NeedleSet:
    """Which of many patterns occur in a text: an RE2::Set pass for each group of them (``cuts``:
    where a group ends). A set's automaton tracks every pattern at once: the formats' needles
    (runs of letters and digits) and the others' (words, escapes, punctuation) in one set are
    alive together on most characters, and it is slower than two passes (on 2,000 texts of 20
    credentials each: 108 -> 42 microseconds a text; on the other texts of a tree, 39 -> 19)."""

    def __init__(self, patterns: list[str], cuts: tuple[int, ...] = ()):
        self.patterns = patterns
        if _re2 is not None:
            options = _re2.Options()
            options.max_mem = 256 << 20
            self._sets = []
            bounds = [0, *cuts, len(patterns)]
            for lo, hi in zip(bounds, bounds[1:]):
                found = _re2.Set.SearchSet(options)
                for p in patterns[lo:hi]:
                    found.Add(p)
                found.Compile()
                self._sets.append((lo, found))
            self._any = _compile("|".join(f"(?:{p})" for p in patterns), capture=False)
        else:
            self._res = [re.compile(p) for p in patterns]

    def match(self, text: str) -> list[int]:
        if _re2 is not None:
            out: list[int] = []
            for lo, found in self._sets:
                got = found.Match(text)
                if got:
                    out.extend(got if not lo else [lo + i for i in got])
            return out
        return [i for i, r in enumerate(self._res) if r.search(text)]

    def any(self, text: str) -> bool:
        if _re2 is not None:
            return self._any.search(text) is not None
        return any(r.search(text) for r in self._res)


# -- values that look like credentials ------------------------------------------

_PLACEHOLDERS = {
    "none", "null", "nil", "true", "false", "undefined", "required", "optional", "hidden", "redacted", "masked",
    "string", "example", "your", "yes", "empty", "unset", "enabled", "disabled", "secret", "password", "token",
    "changeit", "changeme", "placeholder", "default", "bearer", "basic", "xxx", "todo", "tbd", "n/a", "sensitive",
    "expired", "invalid", "missing", "provided", "configured", "available", "unknown", "ok", "set", "valid",
}
_NUMERIC = re.compile(r"[\d.:/ +,-]+")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z_$]*")  # a word of prose or a name in code
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+(?:\(\))?")  # config.token, os.environ
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]+")  # YOUR_API_KEY, OPENAI_TOKEN: names, not values
_PLACEHOLDER_WORDS = ("your", "here", "example", "placeholder", "dummy", "sample", "xxxx", "redacted", "<", ">",
                      "****", "••", "…", "...")
_PLACEHOLDER_WORD = re.compile("|".join(map(re.escape, _PLACEHOLDER_WORDS)))  # one search, not a test a word
_FILE_NAME = re.compile(r"[\w.-]+\.(?:json|ya?ml|toml|ini|env|txt|md|py|js|ts|sh|conf|cfg|pem|key|crt|log|db|"
                        r"sqlite|pub|ppk|p12|pfx|jks|keystore|gpg|asc|age|html?|css|csv|xml|lock|zip|gz)")
_PATH_OR_HOST = re.compile(r"[\w.-]+(?:/[\w.-]+)+/?|[\w-]+(?:\.[\w-]+)+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


# Each ASCII character's class for _classes: d(igit), u(pper), l(ower), s(ymbol).
_CLASS_OF = bytes(ord("d" if chr(b).isdigit() else "u" if chr(b).isupper() else "l" if chr(b).islower() else "s")
                  for b in range(128)) + b"s" * 128


def _classes(v: str) -> tuple[bool, bool, bool, bool]:
    """Whether ``v`` holds a digit, an upper-case letter, a lower-case one, anything else (in
    that order of tests: str.isdigit, isupper, islower). An ASCII text is classed in C (a
    translation), another one character by distinct character."""
    if v.isascii():
        got = v.encode("ascii").translate(_CLASS_OF)
        return b"d" in got, b"u" in got, b"l" in got, b"s" in got
    digit = upper = lower = symbol = False
    for c in set(v):
        if c.isdigit():
            digit = True
        elif c.isupper():
            upper = True
        elif c.islower():
            lower = True
        else:
            symbol = True
    return digit, upper, lower, symbol


@functools.lru_cache(maxsize=512)  # (n <= 512: at most 512 lists, 4 MB)
def _entropy_terms(n: int) -> list[float]:
    """c / n * log2(c / n) for each count c of a character in a text of n."""
    return [0.0] + [c / n * math.log2(c / n) for c in range(1, n + 1)]


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    if not n:
        return 0.0
    if n > 512:
        return -sum(c / n * math.log2(c / n) for c in Counter(value).values())
    return -sum(map(_entropy_terms(n).__getitem__, Counter(value).values()))  # (the same terms, in the same order)


_WHITESPACE = re.compile(r"\s")  # (str.isspace's characters: both are Py_UNICODE_ISSPACE)


def _has_space(v: str) -> bool:
    """Whether ``v`` holds a white-space character (_WHITESPACE), without a regular expression for
    most values: every one of them but the ASCII space is a character str.isprintable refuses."""
    return (" " in v or not v.isprintable()) and _WHITESPACE.search(v) is not None


def _dotted_or_file(v: str) -> bool:
    """_DOTTED or _FILE_NAME, whole: both need a "." (or a "::", a "->"), which most values lack
    (and either pattern, tried on a long value without one, goes back over it character by character)."""
    if "." in v:
        return _DOTTED.fullmatch(v) is not None or _FILE_NAME.fullmatch(v) is not None
    return ("::" in v or "->" in v) and _DOTTED.fullmatch(v) is not None


def looks_secret(value: str, quoted: bool = False) -> bool:
    """Whether the value of a ``password=``/``token:`` assignment looks like a
    credential rather than prose, code, a path, a number or a placeholder."""
    v = value.strip()
    n = len(v)
    if n < 6 or n > 2048 or _MARK in v:
        return False
    if v[0] in "$<{%*([#@&." or "://" in v or v[1:3] == ":\\" or _has_space(v):
        return False
    if v.endswith(("()", "(", ")")) or "${" in v or "{{" in v:
        return False
    if v[0] in "/~" and not (n >= 30 and "." not in v and v.count("/") <= 3 and _aws_secret_shape(v)):
        return False  # a path (a base64 secret may start with a slash too)
    low = v.lower()
    if low in _PLACEHOLDERS or not low.strip("*x•._-#?0") or _CONSTANT.fullmatch(v):
        return False
    if _PLACEHOLDER_WORD.search(low):
        return False
    if _NUMERIC.fullmatch(v) or _UUID.fullmatch(v):
        return False
    if not quoted and ((n < 24 and _IDENTIFIER.fullmatch(v)) or _dotted_or_file(v)):
        return False  # a name in code (getPassword, config.token), a word of prose, a file name
    digit, upper, lower, symbol = _classes(v)
    if n >= 20:
        return digit + upper + lower + symbol >= 2
    classes = digit + upper + lower + symbol
    return classes >= 2 and (digit or symbol or n >= 8)


_EDGE = "*.,;:!?()[]{}\"'`\\_~"  # markdown and punctuation around a word of prose


def _random_looking(v: str, min_len: int = 8) -> bool:
    """For a value beside a credential word with nothing but a space or "is"
    between them: long enough, with digits or mixed case (not a word, not a
    word in markdown), and of high entropy. (ASCII only: a word of another script beside one of
    this, "是什么？Введите", has both cases and symbols, and is prose.)"""
    if len(v) < min_len or not v.isascii() or not looks_secret(v):
        return False
    digit, upper, lower, symbol = _classes(v)
    if not (digit and (upper or lower)) and not (upper and lower and (digit or symbol)):
        return False
    if v.isdigit() or _PATH_OR_HOST.fullmatch(v):
        return False
    return entropy(v) >= min(3.0, math.log2(len(v)) - 0.3)


def _random_key(v: str) -> bool:
    """The value of a FOO_KEY variable that is a key: 16 characters or more, random-looking
    (``base64:`` and ``hex:`` prefixes allowed), not a name, a word or a path."""
    body = v.split(":", 1)[1] if v[:7].lower() == "base64:" or v[:4].lower() == "hex:" else v
    if len(body) < 16 or len(body) > 4096 or re.fullmatch(r"[A-Za-z0-9+/=_-]+", body) is None:
        return False
    digit, upper, lower, _symbol = _classes(body)
    if not (digit and (upper or lower)) and not (upper and lower):
        return False
    low = body.lower()
    if _PLACEHOLDER_WORD.search(low) or _CONSTANT.fullmatch(body):
        return False
    return entropy(body) >= 3.3


def _basic_auth(v: str) -> bool:
    """A base64 text of "user:password" (both parts present, printable)."""
    if not 8 <= len(v) <= 1024 or re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", v) is None or len(v) % 4 == 1:
        return False
    try:
        plain = base64.b64decode(v + "=" * (-len(v) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    user, sep, pw = plain.partition(":")
    return bool(sep and user and pw) and plain.isprintable() and not any(c.isspace() for c in plain)


def _aws_secret_shape(value: str) -> bool:
    return (any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() or c in "+/" for c in value))


_DIGITS = "0123456789"


def _has_digit(value: str) -> bool:
    if value.isascii():  # (str.isdigit of an ASCII character: the ten digits)
        return any(d in value for d in _DIGITS)
    return any(c.isdigit() for c in value)


def _mixed_case(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def _url_password(value: str) -> bool:
    """Anything in a URL's password place, but a placeholder (``***``, ``$PASS``, ``<password>``)."""
    return bool(value) and not (value[0] in "$<{%[" or value.lower() in _PLACEHOLDERS
                                or not value.strip("*x•._-#?") or _MARK in value)


def _loose_url_password(pw: str) -> bool:
    """A URL's password holding "/", "?" or "#", not a port and a path (``host:8080/a@b``) nor
    a path (``github.com:org/pkg.git@v1``)."""
    if pw[0] in "/?#" or re.match(r"[0-9]+(?:[/?#]|$)", pw):
        return False
    if "#" in pw or "?" in pw or not _PATH_OR_HOST.fullmatch(pw):
        return True
    return _mixed_case(pw) and _has_digit(pw) and "." not in pw


# -- credential words ----------------------------------------------------------

# detect-secrets' KeywordDetector names, plus token, api-key, passphrase, credential.
_KEYWORDS = "|".join([k.replace("_?", "[_-]?") for k in _DS_KEYWORDS]
                     + ["token", "api[_-]?key", "apikey", "passphrase", "credentials?", "access[_-]?key",
                        "secret[_-]?key", "client[_-]?secret", "pass", "subscription[_-]?key", "functions[_-]?key",
                        "license[_-]?key", "master[_-]?key"])
# A name may end in one of these after the keyword (apiKeyValue, token_secret, password2).
_SUFFIX = r"(?:[_-]?(?:access|api|app|client|auth|bot|id))?(?:[_-]?(?:key|value|secret|token|string|str|b64))?[0-9]*"
# ...these make it something else: a count, an id, a file...
_NOT_SECRET_SUFFIX = re.compile(
    r"(?i)(?:s|_?(?:type|id|ids|name|names|file|path|dir|url|uri|count|len|length|size|limit|expir\w*|ttl|"
    r"endpoint|hash|header|field|env|var|prompt|policy|manager|store|ref|format|mode|usage|budget|"
    r"level|index|input|output|estimate|ize|izer|ization|stats|rate|per\w*|max|min|stdin|cmd|command|helper|"
    r"prefix|hint|label|pattern|regex|rule|reset|change|strength|required|label|source|provider|kind))$"
)
_KEY_NAME = re.compile(rf"(?i)(?:{_KEYWORDS})([\w-]*)$|^authorization$|^x-api-key$|^cookie$")
_PASSWORD_WORDS = ("pass", "pwd", "contrase", "密码", "口令", "パスワード", "비밀번호", "암호", "暗証")


@functools.lru_cache(maxsize=4096)  # (names repeat: password, GH_TOKEN, api_key...)
def _name_is_secret(name: str) -> bool:
    """A JSON key or variable name that holds a credential (``api_key``,
    ``GITHUB_TOKEN``, ``clientSecret``), not one about them (``max_tokens``,
    ``password_file``, ``tokenizer``)."""
    if len(name) > 64:
        return False
    m = _KEY_NAME.search(name)
    if m is None:
        return False
    low = name.lower()
    if low.startswith(("max", "num", "total", "input", "output", "cache", "prompt", "completion", "reasoning")):
        return False
    if low in ("pass", "bypass", "pwd", "oldpwd") or low.endswith(("bypass", "compass", "passes")):
        return False  # (PWD, OLDPWD: the shell's working directories)
    suffix = m.group(1) or ""
    return not (suffix and _NOT_SECRET_SUFFIX.search(suffix))


# An environment variable of any name ending in _KEY (RAILS_MASTER_KEY, APP_KEY, FERNET_KEY,
# MISTRAL_KEY...): a credential when its value is random (see Detector._assignments), but these.
_ENV_KEY = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_KEY(?:_?[0-9]+)?")
_NOT_ENV_KEY = re.compile(r"(?:^|_)(?:PUBLIC|PUB|SORT|PARTITION|PRIMARY|FOREIGN|CACHE|HOT|SHORTCUT|MAP|HASH|RANGE|"
                          r"ROUTING|IDEMPOTENCY|OBJECT|BUCKET|LOCK|QUEUE|GPG|PGP|I18N|TRANSLATION|DEDUP|GROUP|"
                          r"SHARD|INDEX|STATE|REGISTRY|SEARCH|RESULT|ROW|ID|CONFIG|FILE|PATH|NAME|TYPE)_")


@functools.lru_cache(maxsize=4096)  # (names repeat: password, GH_TOKEN, api_key...)
def _env_key_name(name: str) -> bool:
    return len(name) <= 64 and _ENV_KEY.fullmatch(name) is not None and _NOT_ENV_KEY.search(name) is None


@functools.lru_cache(maxsize=4096)  # (names repeat: password, GH_TOKEN, api_key...)
def _keyword_kind(name: str) -> str:
    low = name.lower()
    return "password" if any(w in low for w in _PASSWORD_WORDS) else "secret"


# -- the detector ----------------------------------------------------------------

def _esc_b(pattern: str) -> str:
    """``pattern`` at the start of a token, or right after a ``\\n``-style escape."""
    return rf"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))(?:{pattern})"


def _finditer_from(regex: re.Pattern, literal: str, text: str, where: str | None = None) -> Iterator[re.Match]:
    """regex.finditer(text), for a pattern whose every match starts with ``literal`` (when not
    empty): the pattern is tried only where str.find finds the literal, in ``where`` when given
    (the text lower-cased, of its length: for a pattern that ignores case)."""
    if not literal:
        yield from regex.finditer(text)
        return
    find = (text if where is None else where).find
    match = regex.match
    at = find(literal)
    while at >= 0:
        m = match(text, at)  # (a look-behind sees the text before ``at``)
        if m is None:
            at = find(literal, at + 1)
        else:
            yield m
            at = find(literal, m.end())


def _leading_literal(pattern: str) -> str:
    """The characters every match of ``pattern`` starts with (letters, digits, ``_``, ``-``, ``=``,
    ``\\.``), or "" when its top level has an alternative or it starts with anything else."""
    depth = 0
    escaped = in_class = False
    for c in pattern:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return ""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c.isascii() and (c.isalnum() or c in "_-="):
            out.append(c)
            i += 1
        elif c == "\\" and pattern[i + 1:i + 2] == ".":
            out.append(".")
            i += 2
        else:
            break
    if out and pattern[i:i + 1] in ("?", "*", "{", "+"):
        out.pop()  # (the last character is repeated or optional)
    return "".join(out)


class _Format:
    """A credential with a recognisable shape; the whole token is the value."""

    def __init__(self, kind: str, pattern: str, needle: str, check=None, group: int = 0, cut: str | None = None,
                 start: str | None = None, inside: bool = False, check_at=None):
        self.kind = kind
        self.check_at = check_at  # (text, start, end) -> bool: what the place around it must be
        # start: what may not come before the token (default: a letter or digit)
        self.regex = re.compile(f"{start}(?:{pattern})" if start is not None else _esc_b(pattern))
        # The needle (RE2): the literal start of the format, at the start of a
        # token (or after a \n escape); a key cut or split in two still has it.
        # (inside: the needle is a part from within the token)
        self.needle = needle if inside else rf"(?:^|[^A-Za-z0-9]|\\[nrt])(?:{needle})"
        self.check = check
        self.group = group
        # The same shape cut short at the end of a text (a 512-character preview, a 255-character label).
        self.cut = re.compile(_esc_b(cut) + r"\Z") if cut else None
        # The literal every match starts with, when there is one: the text is searched for it with
        # str.find and the pattern tried there (a pattern behind a look-behind is tried at every
        # character of the text, for each format whose needle it holds).
        self.literal = _leading_literal(pattern)

    def finditer(self, text: str) -> Iterator[re.Match]:
        """regex.finditer(text): the same matches."""
        return _finditer_from(self.regex, self.literal, text)

    def find(self, text: str, out: list) -> None:
        for m in self.finditer(text):
            value = m.group(self.group)
            if (self.check is None or self.check(value)) and \
                    (self.check_at is None or self.check_at(text, m.start(self.group), m.end(self.group))):
                out.append((value, self.kind, m.start(self.group), m.end(self.group)))
                if "%" in value and self.group:  # a URL's parameter: the value decoded too
                    plain = _unquote(value)
                    if plain != value:
                        out.append((plain, self.kind, -1, -1))


def _unquote(text: str) -> str:
    from urllib.parse import unquote

    return unquote(text)


def _param_ok(value: str, n: int) -> bool:
    """A URL parameter's value that is a key (base64 or url-safe of high entropy), not a word or a name."""
    v = _unquote(value)
    return (len(v) >= n and re.fullmatch(r"[A-Za-z0-9+/_-]+={0,2}", v) is not None and _mixed_case(v)
            and any(c.isdigit() or c in "+/_-=" for c in v) and entropy(v) >= 3.5)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


_WRAP_RUN = re.compile(r"[A-Za-z0-9_+/-]+={0,2}")


def _aws_id_ok(text: str, start: int, end: int) -> bool:
    """An access key id standing alone, or inside a longer run of letters and digits (a base64
    text) when its 16 characters hold a digit (as nearly all do; a word in capitals does not)."""
    if start == 0 or not text[start - 1].isalnum():
        return True
    return any(c.isdigit() for c in text[start + 4:end])


_T = "A-Za-z0-9_-"
_GITLAB = "glpat|gldt|glft|glsoat|glrt|glrtr|glcbt|glimt|glptt|glagent|gloas|glffct|glnat"  # detect-secrets' and newer
FORMATS = [
    _Format("anthropic_key", rf"sk-ant-[{_T}]{{20,}}", "sk-ant-", cut=rf"sk-ant-[{_T}]{{8,}}"),
    _Format("openai_key", rf"sk-[{_T}]*T3BlbkFJ[{_T}]+", "T3BlbkFJ", inside=True),
    _Format("openai_key", rf"sk-(?:proj|svcacct|admin|None)-[{_T}]{{20,}}", "sk-",
            cut=rf"sk-(?:proj|svcacct|admin)-[{_T}]{{8,}}"),
    _Format("api_key", rf"sk-[{_T}]{{20,}}", "sk-",  # DeepSeek, Qwen, OpenRouter, Moonshot... (not sk-learn-2024)
            check=lambda v: _has_digit(v) and _random_segment(v.replace("_", "-"))),
    _Format("github_token", r"gh[pousr]_[A-Za-z0-9_]{36,}", "gh[pousr]_",
            cut=r"gh[pousr]_[A-Za-z0-9_]{8,}"),
    _Format("github_token", r"github_pat_[A-Za-z0-9_]{22,}", "github_pat_", cut=r"github_pat_[A-Za-z0-9_]{8,}"),
    _Format("gitlab_token", rf"(?:{_GITLAB})-[{_T}]{{20,}}|GR1348941[{_T}]{{20,}}", f"(?:{_GITLAB})-|GR1348941",
            cut=rf"glpat-[{_T}]{{8,}}"),
    _Format("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{16,}",
            r"hooks\.slack\.com"),
    _Format("slack_token", r"(?i:xox[abposre])-[A-Za-z0-9-]{10,}|xapp-\d+-[A-Za-z0-9-]{10,}"
            r"|xoxe\.xox[bp]-[A-Za-z0-9-]+", "(?i:xox[a-z])[.-]|xapp-", cut=r"xox[abposr]-[A-Za-z0-9-]{8,}"),
    _Format("stripe_key", r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}|whsec_[A-Za-z0-9]{24,}",
            "[sr]k_(?:live|test)_|whsec_", cut=r"(?:sk|rk)_live_[0-9a-zA-Z]{8,}"),
    _Format("npm_token", r"npm_[A-Za-z0-9]{36,}", "npm_"),
    _Format("pypi_token", rf"pypi-[{_T}]{{40,}}", "pypi-", check=_mixed_case, cut=rf"pypi-AgE[{_T}]{{8,}}"),
    _Format("sendgrid_key", rf"SG\.[{_T}]{{16,}}\.[{_T}]{{16,}}", r"SG\."),
    _Format("mailchimp_key", r"[0-9a-f]{32}-us\d{1,2}(?![0-9])", "[0-9a-f]{32}-us[0-9]", inside=True),
    _Format("telegram_bot_token", r"\d{8,10}:[0-9A-Za-z_-]{35,}", "[0-9]:[0-9A-Za-z_-]{30}", inside=True,
            start="(?<![0-9])"),  # also right after /bot in an API URL
    _Format("discord_bot_token", rf"[MNO][A-Za-z\d_-]{{23,30}}\.[A-Za-z\d_-]{{6,7}}\.[A-Za-z\d_-]{{27,}}",
            r"\.[0-9A-Za-z_-]{6,7}\.[0-9A-Za-z_-]{20}", inside=True),
    _Format("google_api_key", r"AIza[0-9A-Za-z_-]{35,}", "AIza", cut=r"AIza[0-9A-Za-z_-]{8,}"),
    _Format("google_oauth_token", rf"ya29\.[{_T}]{{20,}}|1//0[{_T}]{{30,}}", r"ya29\.|1//0",
            cut=rf"ya29\.[{_T}]{{8,}}"),
    _Format("google_oauth_secret", rf"GOCSPX-[{_T}]{{20,}}", "GOCSPX-", cut=rf"GOCSPX-[{_T}]{{8,}}"),
    _Format("huggingface_token", r"hf_[A-Za-z0-9]{30,}", "hf_", check=_mixed_case, cut=r"hf_[A-Za-z0-9]{12,}"),
    _Format("groq_key", r"gsk_[A-Za-z0-9]{40,}", "gsk_", cut=r"gsk_[A-Za-z0-9]{8,}"),
    _Format("xai_key", r"xai-[A-Za-z0-9]{40,}", "xai-", cut=r"xai-[A-Za-z0-9]{12,}"),
    _Format("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}", "do[opr]_v1_", cut=r"do[opr]_v1_[a-f0-9]{8,}"),
    _Format("square_key", rf"sq0(?:csp|atp)-[{_T}]{{22,}}", "sq0(?:csp|atp)-"),
    _Format("twilio_key", r"SK[0-9a-f]{32}(?![0-9A-Za-z])", "SK[0-9a-f]{32}"),
    _Format("artifactory_token", r"AKCp[A-Za-z0-9]{60,}", "AKCp"),
    _Format("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32,}", "shp[a-z]{2}_"),
    _Format("linear_key", r"lin_api_[A-Za-z0-9]{40,}", "lin_api_"),
    _Format("notion_token", r"ntn_[A-Za-z0-9]{40,}|secret_[A-Za-z0-9]{43}(?![A-Za-z0-9])",
            "ntn_[A-Za-z0-9]{40}|secret_[A-Za-z0-9]{43}"),
    _Format("azure_storage_key", r"AccountKey=([A-Za-z0-9+/]{80,}={0,2})", "AccountKey=", group=1),
    _Format("vault_token", r"hv[sbr]\.[A-Za-z0-9_-]{24,}", r"hv[sbr]\.", cut=r"hvs\.[A-Za-z0-9_-]{8,}"),
    # STS session tokens (the base64 of their binary header), taken whole however long
    _Format("aws_session_token", r"(?:IQoJb3JpZ2luX2V|FwoGZXIvYXdzE|IQoDYXdzE)[A-Za-z0-9+/]{60,}={0,2}",
            "IQoJb3JpZ2luX2V|FwoGZXIvYXdzE|IQoDYXdzE", inside=True, start="(?<![A-Za-z0-9+/])",
            cut=r"(?:IQoJb3JpZ2luX2V|FwoGZXIvYXdzE)[A-Za-z0-9+/]{8,}"),
    _Format("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{50,}", "AGE-SECRET-KEY-1"),
    _Format("discord_webhook", r"discord(?:app)?\.com/api/webhooks/\d{15,21}/([A-Za-z0-9_-]{40,})",
            r"discord(?:app)?\.com/api/webhooks/", inside=True, group=1, start="(?<![A-Za-z0-9.-])"),
    _Format("feishu_webhook", r"(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/([A-Za-z0-9-]{20,})",
            "open-apis/bot/v2/hook/", inside=True, group=1, start="(?<![A-Za-z0-9-])"),
    _Format("wecom_webhook", r"qyapi\.weixin\.qq\.com/cgi-bin/webhook/send\?(?:[\w=&-]*&)?key=([A-Za-z0-9-]{20,})",
            r"qyapi\.weixin\.qq\.com", inside=True, group=1, start="(?<![A-Za-z0-9-])"),
    _Format("sentry_dsn", r"://([0-9a-f]{32})(?::[0-9a-f]{32})?@[A-Za-z0-9.-]+(?::\d+)?/(?:[\w-]+/)*\d+",
            "://[0-9a-f]{32}[:@]", inside=True, group=1, start=""),
    # Azure: a SAS token's signature, a Functions key in a URL (a value of high entropy only)
    _Format("azure_sas_signature", r"sig=([A-Za-z0-9%+/_-]{20,}(?:%3[dD]|=){0,2})", "[?&;]sig=", inside=True,
            group=1, start="(?<=[?&;])", check=lambda v: _param_ok(v, 20)),
    _Format("azure_function_key", r"code=([A-Za-z0-9_%=-]{30,})", "[?&;]code=", inside=True, group=1,
            start="(?<=[?&;])", check=lambda v: _param_ok(v, 30)),
    # (last: Detector._aws reads it) an access key id, also inside a longer base64 run (see _aws_id_ok)
    _Format("aws_access_key", rf"(?:{_ds(AWSKeyDetector)})(?![A-Z0-9])",
            "(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}", inside=True, start="", check_at=_aws_id_ok),
]
_AWS_ID = FORMATS[-1]
# detect-secrets' own patterns are each covered above, token taken whole:
assert _ds(StripeDetector).startswith("(?:r|s)k_live_") and _ds(SendGridDetector).startswith(r"SG\.")
assert _ds(PypiTokenDetector).startswith("pypi-") and "-us" in _ds(MailchimpDetector)
assert _ds(TelegramBotTokenDetector).startswith(r"\d{8,10}:") and _ds(DiscordBotTokenDetector).startswith("[MNO]")
assert "T3BlbkFJ" in _ds(OpenAIDetector) and _ds(SquareOAuthDetector).startswith("sq0csp-")
assert _ds(TwilioKeyDetector, 1).startswith("SK") and "AKC" in _ds(ArtifactoryDetector)
assert _ds(AzureStorageKeyDetector).startswith("AccountKey=") and "glpat" in _ds(GitLabTokenDetector)
assert _ds(SlackDetector).startswith("xox") and _ds(GitHubTokenDetector).startswith("(ghp|gho|ghu|ghs|ghr)_")
assert _ds(SlackDetector).startswith("xox") and "_authToken" in _ds(NpmDetector)

# detect-secrets' BEGIN lines, and the ones it lacks: PKCS#8 encrypted keys, PuTTY's version 3 files
_PEM_START = re.compile(r"(?:-{2,5} ?)?(?:" + "|".join(
    [p.pattern for p in PrivateKeyDetector.denylist] + ["BEGIN ENCRYPTED PRIVATE KEY", "BEGIN [A-Z0-9]+ PRIVATE KEY",
                                                        "PuTTY-User-Key-File-[0-9]"]) + r")[^\r\n\\]*")
_PEM_END = re.compile(r"END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?[ -]*|Private-MAC: *[0-9A-Fa-f]*")
# the lines of a block, each perhaps behind its number (cat -n, an editor's or a Read tool's: "  12\t", "12→", "12:")
_LINE_NO = r"(?:[ \t]*[0-9]{1,6}(?:→|\t|\\t|:|\|)[ \t]*)?"
_PEM_BODY = re.compile(rf"(?:(?:\r?\n|\\r?\\n){_LINE_NO}(?:[\w-]+: [^\r\n\\]*|[A-Za-z0-9+/=]+))*")
_PEM_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}")
_JWT_PATTERN = r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_+/=-]*)?"
_JWT = re.compile(_esc_b(_JWT_PATTERN))
_JWT_LITERAL = _leading_literal(_JWT_PATTERN)
assert JwtTokenDetector.denylist[0].pattern.startswith("eyJ")
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")

# Quoted values, a backslash escaping the quote inside; or unquoted, up to a space, quote or separator.
_QUOTED = r"""(?:"(?P<dq>(?:\\.|[^"\\\r\n]){1,512})"|'(?P<sq>(?:\\.|[^'\\\r\n]){1,512})'|`(?P<bq>[^`\r\n]{1,512})`""" \
          r"""|\\{1,3}"(?P<eq>[^"\\\r\n]{1,512})\\{1,3}")"""
_UNQUOTED = r"(?P<uv>[^\s\"'`,;&|<>(){}\[\]\\]{1,512})"
_VALUE = rf"(?:{_QUOTED}|{_UNQUOTED})"
_CLOSE = r"(?:\\{0,3}[\"'\]`]){0,2}"
_OP = r"(?::=|=>|==?|:|：|＝|%3[dDaA])"

# Each of these starts with a literal (so re skips ahead to where it can
# match); what may not come before it is checked in code (_starts_token).
# After a credential-sounding name (found by str.find, see Detector._assignments): ``= value``, ``: "value"``...
_AFTER_NAME = re.compile(rf"{_CLOSE}[ \t]*(?P<op>{_OP})[ \t]*{_VALUE}")
_PROSE = re.compile(
    r"(?i)(?P<name>password|passwd|passphrase|pwd|secret|token|api[ _-]?key|access[ _-]?key|"
    r"secret[ _-]?key|private[ _-]?key|client[ _-]?secret|credentials?|auth[ _-]?token|access[ _-]?token)"
    r"(?:[ \t]+(?:for|of|to)[ \t]+[\w.@-]{1,40})?"
    r"(?:[ \t]+(?:is|was|are|were|=|:|->|=>)[ \t]+|[ \t]+)[\"'`]?(?P<uv>[^\s\"'`,;<>(){}\[\]]{8,256})")


def _said(names: str, verbs: str, quotes: str, chars: str, *, verbs_repeat: bool = False,
          flags: str = "") -> re.Pattern:
    """A credential said in words: one of ``names``, then one of ``verbs`` ("is", a colon, an equals
    sign; white space around it; several in a row with ``verbs_repeat``) or white space alone, maybe
    an opening quote (a straight one or one of ``quotes``), and the value: 4 to 256 of ``chars``."""
    op = rf"[ \t]*(?:{verbs})[ \t]*"
    if verbs_repeat:
        op = rf"(?:{op})+"
    return re.compile(rf"{flags}(?P<name>{names})(?P<op>{op}|[ \t]+)[\"'`{quotes}]?(?P<uv>[{chars}]{{4,256}})")


_CJK = _said("密码|口令|密钥|秘钥|令牌|パスワード|暗証番号|トークン|비밀번호|암호|토큰|API ?キー|API ?키",
             "是|为|為|：|:|は|が|を|는|은|이|가|=|＝", "「『“", r"A-Za-z0-9!@#$%^&*_+\-=.~/?:", verbs_repeat=True)
_FLAG = re.compile(
    r"(?i)--(?P<name>[\w-]*(?:password|passwd|passphrase|token|secret|api-?key|auth-key|access-key)[\w-]*)"
    rf"(?:=|[ \t]+){_VALUE}")
_CMD_P = re.compile(  # mysql -pX, -p'X'; sshpass -p X; docker login -p X; redis-cli -a X
    r"(?i:(?:mysql|mysqldump|mysqladmin|mysqlsh|mariadb|mariadb-dump)\b[^\n|;&]*?[ \t]-p"
    rf"(?:{_QUOTED}|(?P<mv>[^\s\"'-][^\s\"']{{2,}}))"
    r"|sshpass\b[^\n|;&]*?[ \t]-p[ \t]*" + _VALUE.replace("?P<", "?P<s_") +
    r"|(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]+registry)[ \t]+login\b[^\n|;&]*?[ \t]-p[ \t]+"
    + _VALUE.replace("?P<", "?P<d_") +
    r"|redis-cli\b[^\n|;&]*?[ \t]-a[ \t]+" + _VALUE.replace("?P<", "?P<r_") + ")")
# More command lines that take a password as an argument (each: the regex, the word that must be in the text).
_PW = r"(?:" + _QUOTED + r"|(?P<uv>[^\s\"'`\-][^\s\"'`]*))"  # quoted, or a word not starting with "-"
_SEG = r"[^\n|;&]*?[ \t]"  # more of the same command
_CMD_MORE = [(re.compile(p), word) for p, word in (
    (rf"\b(?:mongosh|mongo|mongodump|mongorestore|mongoexport|mongoimport|mongostat|mongotop)\b{_SEG}-p[ \t]+{_PW}",
     "mongo"),
    (rf"\b(?:sqlcmd|bcp|osql|isql)\b{_SEG}-P[ \t]*{_PW}", ("sqlcmd", "bcp", "osql", "isql")),
    (rf"\b(?:smbclient|rpcclient|smbcacls|smbget|smbmap|net(?:[ \t]+rpc)?)\b{_SEG}(?:-U|--user(?:name)?=?)[ \t]*[\"']?"
     r"[^\s%\"']+%(?P<uv>[^\s\"']+)", "%"),
    (rf"[ \t]-(?:passout|passin|pass|password|passphrase)[ \t]+[\"']?pass:(?P<uv>[^\s\"']+)", "pass:"),
    (rf"\bkeytool\b{_SEG}-(?:storepass|keypass|srcstorepass|deststorepass|srckeypass|destkeypass)[ \t]+{_PW}",
     "keytool"),
    (rf"[ \t]-(?:storepass|keypass|srcstorepass|deststorepass|srckeypass|destkeypass)[ \t]+{_PW}", "pass "),
    (rf"\bldap(?:search|add|modify|delete|whoami|passwd|compare|modrdn|exop|url)\b{_SEG}-w[ \t]+{_PW}", "ldap"),
    (rf"\b(?:zip|unzip|zipcloak|zipnote)\b{_SEG}-P[ \t]+{_PW}", "zip"),
    (r"\b(?:7z|7za|7zr|rar|unrar)\b[^\n|;&]*?[ \t]-p(?:" + _QUOTED + r"|(?P<uv>[^\s\"'`\-][^\s\"'`]*))", ("7z", "rar")),
    (rf"\b(?:echo|printf)[ \t]+(?:-[ne]+[ \t]+)?{_PW}[ \t]*\|[ \t]*sudo\b[^\n|;&]*?[ \t]-[A-Za-z]*S", "sudo"),
    (r"(?i)\bnet[ \t]+use\b(?:[ \t]+[a-z*]:)?[ \t]+\\\\\S+[ \t]+(?:(?P<uv>[^\s/\"'*][^\s\"']*)[ \t]+)?/user:\S+"
     r"(?:[ \t]+(?P<uv2>[^\s/\"'*][^\s\"']*))?", "net"),
    (rf"\blftp\b{_SEG}-u[ \t]+[\"']?[^\s,\"']+,(?P<uv>[^\s\"']+?)[\"']?(?=\s|$)", "lftp"),
)]
# htpasswd [-flags] [file] user password: with "b" in the flags, the password is on the command line
_HTPASSWD = re.compile(r"\bhtpasswd\b(?P<flags>(?:[ \t]+-[A-Za-z]+)+)(?P<args>(?:[ \t]+[^\s\-|;&][^\s|;&]*){2,3})")
_CMD_WORDS = ("mongo", "sqlcmd", "bcp", "osql", "isql", "smb", "rpcclient", "net ", "pass:", "keytool", "storepass",
              "keypass", "ldap", "zip", "7z", "rar", "sudo", "lftp", "htpasswd")
_CURL_USER = re.compile(
    r"-(?:u|-user|-proxy-user)(?:=|[ \t]*)(?P<q>[\"']?)(?P<user>[^\s:\"'@]{1,64}):(?P<uv>[^\s\"']{1,256})(?P=q)")
_COOKIE = re.compile(r"(?i)(?:set-cookie|cookie)[\"']?[ \t]*[:=][ \t]*[\"']?(?P<pairs>[^\r\n\"'\\]{3,4096})"
                     r"|-(?:b|-cookie)[ \t]+[\"'](?P<cpairs>[^\r\n\"']{3,4096})")
_COOKIE_PAIR = re.compile(r"(?:^|[;,][ \t]*)(?P<name>[\w.$-]{1,64})=(?P<uv>[^;,\s]{6,2048})")
_SESSION_COOKIE = re.compile(r"(?i)sess|sid|token|auth|jwt|csrf|xsrf|remember|login|key|secret|pass")
_AUTHORIZATION = re.compile(
    r"(?i)(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|token|bot|digest|apikey|"
    r"sso-key|key)[ \t]+)?(?P<uv>[a-z0-9._~+/:=-]{8,})")
_BEARER = re.compile(r"(?i)bearer[ \t]+(?P<uv>[a-z0-9._~+/-]{16,}=*)")
# Where a credential-sounding name may be: around one of these (lower case).
_NAME_ROOTS = ("pass", "pwd", "secret", "token", "key", "credential", "contrase")
_COMMANDS = ("mysql", "mariadb", "sshpass", "login", "redis-cli")
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_-")


def _cmd_word(v: str) -> bool:
    """A word that follows a password flag in commands without being one: a shell
    variable or substitution, a prompt request, a file of passwords."""
    return v[0] in "$`(<>|&;" or v.lower() in ("stdin", "-", "prompt", "file:", "env:") or v.startswith(("env:", "file:", "fd:"))


def _starts_token(text: str, at: int, also: str = "_-") -> bool:
    """Whether a token starts at ``at``: not right after a letter, a digit or one of ``also``."""
    if at == 0:
        return True
    c = text[at - 1]
    return not (c.isalnum() or c in also)


# ADO.NET / ODBC connection strings: Pwd= (the shell's PWD is no password) beside another of their keys
_CONN_PWD = re.compile(r"(?i)(?<![\w$])pwd[ \t]*=[ \t]*(?P<uv>\{[^}\r\n]{1,256}\}|[^;\"'\s{][^;\"'\s]{0,255})")
_CONN_KEYS = re.compile(r"(?i)(?:^|[;\"'\s])(?:uid|user id|user|username|server|data source|database|dsn|driver|"
                        r"initial catalog|host|port|trusted_connection|encrypt)[ \t]*=")
# base64 of "user:password": .npmrc's _auth=, a Docker config's "auth"
_AUTH_KEYS = frozenset(("auth", "_auth"))
_AUTH_LINE = re.compile(r"(?<![\w-])(?:_auth|[\"']auth[\"'])[ \t]*[:=][ \t]*[\"']?(?P<uv>[A-Za-z0-9+/]{8,}={0,2})")
# Words before a password in other languages, and the English ones before a CJK "is" (token 是 X)
_INTL = _said(r"密碼|密鑰|金鑰|權杖|пароль|пароля|паролем|токен|ключ(?: api)?|"
              r"(?<![A-Za-z])(?:token|secret|password|passwd|api[ _-]?key)",
              "是|为|為|：|:|=|＝|—|–|-|это|от", "「『“«", r"A-Za-z0-9!@#$%^&*_+\-=.~/?", flags="(?i)")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://(?P<user>[^\s/?#:@\"'<>\[\]]*):(?P<pw>[^\s/?#\"'<>]*)@"
                  r"(?P<host>[a-z0-9_.~\[\]-]+)")
# A password holding "/", "?" or "#" (where the strict form above stops): up to an "@" and a host name.
_URL_LOOSE = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://(?P<user>[^\s/?#:@\"'<>\[\]]+):(?P<pw>[^\s\"'<>@]+)@"
                        r"(?P<host>(?:localhost|[a-z0-9_-]+(?:\.[a-z0-9_-]+)+|\[[0-9a-f:.]+\])(?![\w-]))")
_OAUTH_BASIC = ("x-oauth-basic", "x-oauth-token")  # https://TOKEN:x-oauth-basic@github.com: the user is the token
_PGPASS = re.compile(r"(?<![\w.:*@\[\]-])(?P<host>[A-Za-z0-9_.*\[\]-]+):(?P<port>\d{1,5}|\*):(?P<db>[\w.*-]+):"
                     r"(?P<user>[\w.*@-]+):(?P<uv>(?:\\:|[^\s:\"'`])+)(?=[\s\"'`]|$)")
# JSON decoding of a string that holds escapes (JSON or shell text inside a tool output)
# How many levels of JSON-in-JSON escaping are read through: a \\u escape n levels deep is written
# with 2 ** (n - 1) backslashes (a log line quoting a tool result quoting a config file is 3).
_ESCAPE_LEVELS = 4
_ESCAPES = re.compile(r"\\(?:u[0-9a-fA-F]{4}|[nrt\"'\\/bf])")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_PATH_EXT = re.compile(r"\.(?:jsonl|json|txt|log|md)(?=$|[./\\])[^/\\]*")
_B64_RUN = r"[A-Za-z0-9+/_-]{16,}={0,2}(?:(?:\r?\n|\\r?\\n)[A-Za-z0-9+/_-]{4,}={0,2})*"
_B64_RUN_RE = re.compile(_B64_RUN)
# Five 4-character groups that can only encode printable ASCII or newlines
# (the first character of a group holds the top six bits of a byte 0x20-0x7e
# or 0x0a, the second two bits of it and the top four of the next, the third
# that byte's low four and the top two of the third byte): one group in 13 of
# random base64 (an image, a signature) fits, five in a row one in 400,000.
_B64_TEXT = r"(?:[CI-Za-f][ACQgwC-HS-Xi-ny-z0-3][ABEFIJMNQRUVYZcdghklopstwx014589][A-Za-z0-9+/_-]){5}"

# A \u escape of any character but a control one (\u001b: ANSI colours), and a run of %XX escapes.
_U_ESCAPE = r"\\u(?:00[2-9a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})"
_PERCENTS = r"(?:%[0-9a-fA-F]{2}){6}"

# Needles: what must occur for a rule to have anything to look at. Each is
# made of characters JSON never escapes, so it shows in a stored JSON column
# as it does in the decoded text (a ``\\uXXXX`` escape of a printable
# character is a needle of its own: the text is then decoded).
_KW_WORD = (r"(?:password|passwd|passphrase|pass|pwd|secret|token|api[_-]?key|apikey|auth[_-]?key|access[_-]?key|"
            r"priv[a-z]*[_-]?key|client[_-]?key|credential|contrase|service[_-]?key|account[_-]?key|db[_-]?key|"
            r"database[_-]?key|subscription[_-]?key|functions[_-]?key|license[_-]?key|master[_-]?key)")
_PROSE_WORD = (r"(?:password|passwd|passphrase|pwd|secret|token|credentials?|api[ _-]?key|access[ _-]?key|"
               r"secret[ _-]?key|private[ _-]?key|client[ _-]?secret|auth[ _-]?token|access[ _-]?token)")
_KW_NEEDLE = "(?i)" + "|".join([
    # NAME = value, "name": "value", NAME: value (the closing quote may be escaped, the value may follow \n)
    rf"{_KW_WORD}{_SUFFIX}(?:\\*[\"'\]`]){{0,2}}[ \t]*(?:[:=：＝]|%3[ad])[ \t]*(?:\\*[\"'`])?"
    r"[^\s\\\"'`,;(){}\[\]<>]",
    # FOO_KEY=value (any name ending in _KEY: see _env_key_name)
    r"_key[0-9]*(?:\\*[\"'\]`]){0,2}[ \t]*[:=][ \t]*(?:\\*[\"'`])?[^\s\\\"'`,;(){}\[\]<>]",
    # {"name": "API_KEY", "value": "..."}
    rf"{_KW_WORD}{_SUFFIX}\\*\"[ \t]*,[ \t]*\\*\"value",
    # password is X, token X, the API key for prod: X
    rf"{_PROSE_WORD}(?:[ \t]+(?:for|of|to)[ \t]+[^\s]{{1,40}})?(?:[ \t]+(?:is|was|are|were|->|=>)[ \t]+|[ \t]+)"
    r"[\"'`]?[^\s\"'\\]*[0-9!@#$%^&*+/=_~-]",  # (the value of _random_looking has a digit or a symbol)
    # --password X, --api-key=X
    r"--[a-z0-9-]*(?:password|passwd|passphrase|token|secret|api-?key|auth-key|access-key)[a-z0-9-]*(?:=|[ \t]+)[^\s-]",
    r"(?:_auth|\\*\"auth\\*\")[ \t]*[:=]",
    r"authorization[\"']?[ \t]*[:=]", r"bearer[ \t]+[a-z0-9._~+/-]{16}", r"cookie[\"']?[ \t]*[:=]", r"-b[ \t]+[\"']",
])
_NEEDLES = [f.needle for f in FORMATS] + [
    r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+",                   # JWT
    "PRIVATE KEY|PuTTY-User-Key",                            # PEM
    r"://[^\s/?#@]*:[^\s@]*@",                               # URL password
    _KW_NEEDLE,                                              # assignments, flags, prose, headers
    "密码|口令|密钥|秘钥|令牌|パスワード|暗証番号|トークン|비밀번호|암호|토큰|API ?キー|API ?키|密碼|密鑰|金鑰|權杖|"
    "(?i:пароль|пароля|паролем|токен|ключ)|(?i:token|secret|password|passwd|api[ _-]?key)[ \t]*(?:是|为|為)",  # CJK...
    r"(?:mysql|mariadb|sshpass|login|redis-cli)[^\n]*\s-[pa]|(?:-u|--user)[= \t]*[^\s:]+:[^\s]"  # command lines
    r"|(?:mongo[a-z]*|sqlcmd|bcp|osql|isql|ldap[a-z]+|zip|unzip|zipcloak|7z[a-z]?|rar|unrar|keytool)\b[^\n]*\s-[pPw]"
    r"|(?:smb[a-z]+|rpcclient|net)\b[^\n]*\s(?:-U|--user)[^\n%]*%|\s-(?:pass(?:out|in|word|phrase)?)\s+[\"']?pass:"
    r"|\s-(?:src|dest)?(?:store|key)pass\s|\|[ \t]*sudo\b[^\n]*\s-[A-Za-z]*S|(?i:net[ \t]+use)\b[^\n]*/user:"
    r"|lftp\b[^\n]*\s-u\s+[^\s,]+,|htpasswd\b[^\n]*\s-[A-Za-z]*b",
    r"[A-Za-z0-9_.*-]:(?:[0-9]+|\*):[^\s:\"\\]+:[^\s:\"\\]+:[^\s\"\\:]",  # .pgpass
    # decode and look again: a \u escape of a printable character (not of a control one, as in ANSI colours)
    _U_ESCAPE,
    # a key in Claude Code's project folder name (the cwd, each character but a letter or digit made "-")
    r"(?:^|[^A-Za-z0-9])(?:gh[pousr]|github-pat|[sr]k-(?:live|test)|whsec|npm|hf|gsk|ya29|do[opr]-v1|hv[sbr]|"
    r"lin-api|ntn|shp[a-z]{2}|SG)-[A-Za-z0-9]{12}|[0-9]{8}-AA[A-Za-z0-9-]{12}",
    # a double URL-encoded text: decoded twice
    "%25[0-9a-fA-F]{2}",
    # strings cut by a concatenation or a shell continuation: read joined
    r"[A-Za-z0-9_-][\"'][ \t]*(?:\+|\.\.?)?[ \t]*(?:\r?\n[ \t]*)?(?:\+|\.\.?)?[ \t]*[\"'][A-Za-z0-9]"
    r"|[A-Za-z0-9_-]\\\r?\n",
]
_N_FORMATS = len(FORMATS)
_WINDOW = 700
_N_JWT, _N_PEM, _N_URL, _N_KW, _N_CJK, _N_CMD, _N_PGPASS, _N_UESC, _N_MANGLED, _N_PCT2, _N_JOIN = \
    range(_N_FORMATS, _N_FORMATS + 11)

# Provider keys as Claude Code's project folder name holds them ("_" and "." made "-"): (kind, regex)
_MANGLED = [(k, re.compile(r"(?<![A-Za-z0-9])(?:" + p + ")")) for k, p in (
    ("github_token", r"gh[pousr]-[A-Za-z0-9]{36,}|github-pat-[A-Za-z0-9]{22}-[A-Za-z0-9]{59,}"),
    ("stripe_key", r"[sr]k-(?:live|test)-[A-Za-z0-9]{16,}|whsec-[A-Za-z0-9]{24,}"),
    ("npm_token", r"npm-[A-Za-z0-9]{36,}"),
    ("huggingface_token", r"hf-[A-Za-z0-9]{30,}"),
    ("groq_key", r"gsk-[A-Za-z0-9]{40,}"),
    ("google_oauth_token", r"ya29-[A-Za-z0-9-]{20,}"),
    ("digitalocean_token", r"do[opr]-v1-[a-f0-9]{64}"),
    ("vault_token", r"hv[sbr]-[A-Za-z0-9-]{24,}"),
    ("linear_key", r"lin-api-[A-Za-z0-9]{40,}"),
    ("notion_token", r"ntn-[A-Za-z0-9]{40,}"),
    ("shopify_token", r"shp(?:at|ca|pa|ss)-[a-fA-F0-9]{32,}"),
    ("sendgrid_key", r"SG-[A-Za-z0-9-]{16,}-[A-Za-z0-9-]{16,}"),
    ("telegram_bot_token", r"[0-9]{8,10}-AA[0-9A-Za-z-]{33,}"),
)]


def _random_segment(value: str) -> bool:
    """Whether a "-"-joined run holds a random part (a key), not only words and numbers."""
    for part in value.split("-"):
        if len(part) >= 12:
            digit, upper, lower, _symbol = _classes(part)
            if ((digit and (upper or lower)) or (upper and lower)) and entropy(part) >= 3.0:
                return True
    return False


# Where a string is cut: "abc" + "def", 'abc' 'def' (on one line or two), abc\<newline>def
_JOIN = re.compile(r"(?<=[A-Za-z0-9_-])([\"'])[ \t]*(?:\+|\.\.?)?[ \t]*(?:\r?\n[ \t]*)?(?:\+|\.\.?)?[ \t]*\1"
                   r"(?=[A-Za-z0-9])"
                   r"|(?<=[A-Za-z0-9_-])\\\r?\n")


def _unescape(text: str) -> str:
    """Backslash escapes as a reader of the JSON or shell text inside decodes them."""
    def one(m: re.Match) -> str:
        s = m.group()
        c = s[1]
        if c == "u":
            code = int(s[2:], 16)
            return s if 0xD800 <= code <= 0xDFFF else chr(code)
        return {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}.get(c, c)

    return _ESCAPES.sub(one, text)


def _unquote_value(value: str) -> str:
    return _unescape(value) if "\\" in value else value


def _b64_text(run: str) -> str | None:
    """The text a base64 run encodes, when it is text (not an image, a
    signature, a hash or a word that happens to fit the alphabet)."""
    run = run.replace("\\r", "").replace("\\n", "").replace("\r", "").replace("\n", "")
    if not (_mixed_case(run)) or run.startswith("/"):
        return None
    if "-" in run or "_" in run:
        if "+" in run or "/" in run:
            return None
        run = run.replace("-", "+").replace("_", "/")
    body = run.rstrip("=")
    for skip in (0, 1):  # a run may start with the letter of a \n escape
        s = body[skip:]
        if len(s) % 4 == 1:
            continue
        head = s[:64]
        try:
            first = binascii.a2b_base64(head + "=" * (-len(head) % 4))
        except (binascii.Error, ValueError):
            continue
        if not _texty(first):
            continue
        try:
            data = binascii.a2b_base64(s + "=" * (-len(s) % 4))
        except (binascii.Error, ValueError):
            continue
        text = data.decode("utf-8", "replace")
        if _texty(data):
            return text
    return None


# The bytes _texty counts as control characters are what remains once these are deleted.
_NOT_BAD = bytes(b for b in range(256) if not (b < 9 or 13 < b < 32 or b == 127))


def _texty(data: bytes) -> bool:
    if not data:
        return False
    bad = len(data.translate(None, _NOT_BAD))
    if bad > len(data) // 50:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 3:  # only a character cut at the end may be incomplete
            return False
        text = data[:exc.start].decode("utf-8")
    if text.isprintable():
        return True
    return sum(1 for c in text if c.isprintable() or c in "\t\r\n") >= 0.97 * len(text)


def _inside_marker(text: str, at: int) -> bool:
    """Whether position ``at`` is inside a marker already written
    ("[REDACTED:github_token]: ..." names no new secret)."""
    before = text[max(0, at - 40): at]
    mark = before.rfind(_MARK)
    return mark >= 0 and "]" not in before[mark:]


def _quoted_value(m: re.Match, prefix: str = "") -> tuple[str | None, int, int, bool]:
    """The value a _VALUE group matched: (value, start, end, quoted)."""
    for g in ("dq", "sq", "bq", "eq"):
        v = m.group(prefix + g)
        if v is not None:
            return v, m.start(prefix + g), m.end(prefix + g), True
    v = m.group(prefix + "uv")
    if v is None:
        return None, -1, -1, False
    return v, m.start(prefix + "uv"), m.end(prefix + "uv"), False


_B64_MEMO_RUN = 512  # base64 runs up to this long are remembered with what their text holds


class Detector:
    """Credential values in one decoded string: ``scan(text)`` -> [(value, kind)]."""

    def __init__(self):
        self.needles = _NeedleSet(_NEEDLES, (_N_FORMATS,))
        self._b64_memo: dict = {}  # (base64 run, depth) -> what find found in its text
        # What a stored JSON column must contain for any string in it to be worth decoding.
        self.row_needles = _NeedleSet(_NEEDLES + [_B64_TEXT])
        self._b64 = _compile(_B64_TEXT, capture=False)
        # Any needle, for a whole batch of rows at once (where each match is tells which row).
        self.finder = _compile("|".join(f"(?:{p})" for p in _NEEDLES + [_B64_TEXT]), capture=False, longest=True)
        # Where the keyword, command-line and CJK rules may match in a long text.
        self.kw_finder = _compile("|".join(f"(?:{_NEEDLES[i]})" for i in (_N_KW, _N_CJK, _N_CMD)), capture=False)

    def rows_hit(self, texts: list[str]) -> set[int]:
        """Which of ``texts`` (a batch of rows, each its columns joined by
        newlines) hold a needle: one RE2 pass over them all."""
        return _rows_hit(self.finder, texts, "\n")

    # -- one string ------------------------------------------------------------

    def scan(self, text: str, cut: bool = False, path: bool = False) -> list[tuple[str, str]]:
        """Every credential value in ``text`` with its kind (values may repeat).
        ``cut``: the text may end in the middle of a credential (a preview);
        ``path``: a file path, also read one name at a time without its extension."""
        out = [(v, k) for v, k, _s, _e in self.find(text, cut)]
        if path:
            names = _PATH_EXT.sub("", text).replace("/", "\n").replace("\\", "\n")
            out.extend((v, k) for v, k, _s, _e in self.find(names))
        return out

    def find(self, text: str, cut: bool = False, depth: int = 0) -> list[tuple[str, str, int, int]]:
        """(value, kind, start, end): start and end place the value in
        ``text``, or are -1 when it was found in a decoded form of it."""
        out: list = []
        if not text or len(text) < 6:
            return out
        hits = self.needles.match(text)
        if cut:  # a credential cut short at the end is shorter than its needle
            tail = text[-300:]
            base = len(text) - len(tail)
            for f in FORMATS:
                if f.cut is not None:
                    m = f.cut.search(tail)
                    if m:
                        out.append((m.group(), f.kind, base + m.start(), base + m.end()))
        if hits:
            # (escapes other than \uXXXX hide no needle: with none, there is nothing to decode)
            self._rules(text, hits, out, cut)
            if "\\" in text and _ESCAPES.search(text):
                self._variant(_unescape(text), out, cut)
        if "%" in text and hits and _PERCENT.search(text):
            self._variant(_url_decode(text), out, cut)
            if _N_PCT2 in hits:  # encoded twice: decoded twice, and each value also as it is once encoded
                found: list = []
                self._variant(_unquote(_unquote(text)), found, cut)
                for v, k, _s, _e in found:
                    out.append((v, k, -1, -1))
                    once = _quote(v)
                    if once != v:
                        out.append((once, k, -1, -1))
        if hits and _N_JOIN in hits:
            self._joined(text, out, cut)
        if depth < 2 and self._b64.search(text):
            self._base64(text, out, depth)
        return out

    def _joined(self, text: str, out: list, cut: bool) -> None:
        """The text with its strings joined where a concatenation or a shell continuation cut
        them: a value found across a cut is kept whole, and so is each of its pieces. Only the
        text around the cuts is read again (cuts closer than 300 characters together)."""
        clusters: list[list[tuple[int, int]]] = []
        for m in _JOIN.finditer(text):
            if clusters and m.start() - clusters[-1][-1][1] < 300:
                clusters[-1].append(m.span())
            else:
                clusters.append([m.span()])
        for gaps in clusters:
            lo, hi = max(0, gaps[0][0] - 200), gaps[-1][1] + 200
            parts, marks, pos = [], [], lo
            for a, b in gaps:
                parts.append(text[pos:a])
                marks.append(sum(map(len, parts)))  # where the cut is in the joined region
                pos = b
            parts.append(text[pos:hi])
            joined = "".join(parts)
            hits = self.needles.match(joined)
            if not hits:
                continue
            found: list = []
            self._rules(joined, hits, found, cut)
            for v, k, s, e in found:
                inner = [p for p in marks if s < p < e] if s >= 0 else []
                if not inner:
                    continue  # (found in the text as it is)
                out.append((v, k, -1, -1))
                points = [s] + inner + [e]
                for a, b in zip(points, points[1:]):
                    piece = joined[a:b]
                    if len(piece) >= MIN_PIECE and _piece_ok(piece):
                        out.append((piece, k, -1, -1))

    def _wrapped(self, text: str, found: list, out: list) -> None:
        """A key a terminal wrapped: it reaches the end of a long line and goes on at the start of
        the next (and the next, while a line is of the key's characters alone). Its pieces are kept."""
        for v, k, s, e in found:
            if s < 0 or text[e:e + 1] not in ("\n", "\r"):
                continue
            width = e - (text.rfind("\n", 0, s) + 1)
            if width < 60:
                continue
            pieces, at = [], e
            while True:
                nl = at + (2 if text[at:at + 2] == "\r\n" else 1)
                m = _WRAP_RUN.match(text, nl)
                if m is None or text[m.end():m.end() + 1] in ("=", ":", "(", ".") \
                        or (len(m.group()) >= MIN_PIECE and not _piece_ok(m.group())):
                    break  # (the next line starts with a name, a word, a call: not the key's end)
                pieces.append(m.group())
                at = m.end()
                if text[at:at + 1] not in ("\n", "\r") or len(pieces) >= 8:
                    break  # (a line of the key's characters alone: it goes on)
            if not pieces:
                continue
            out.append((v + "".join(pieces), k, -1, -1))
            for piece in pieces:
                if len(piece) >= MIN_PIECE and _piece_ok(piece):
                    out.append((piece, k, -1, -1))

    def _variant(self, text: str, out: list, cut: bool, deeper: int = _ESCAPE_LEVELS - 1) -> None:
        if deeper and "\\" in text and _ESCAPES.search(text):  # escaped again: JSON printed inside JSON
            self._variant(_unescape(text), out, cut, deeper - 1)
        hits = self.needles.match(text)
        if hits:
            found: list = []
            self._rules(text, hits, found, cut)
            if _N_JOIN in hits:
                self._joined(text, found, cut)
            out.extend((v, k, -1, -1) for v, k, _s, _e in found)

    def _base64(self, text: str, out: list, depth: int) -> None:
        memo = self._b64_memo
        for m in _B64_RUN_RE.finditer(text):
            run = m.group()
            key = (run, depth)
            found = memo.get(key)
            if found is None:
                decoded = _b64_text(run)
                found = self.find(decoded, depth=depth + 1) if decoded is not None else []
                if len(run) <= _B64_MEMO_RUN:  # (a JWT's header, a config blob: the same again and again)
                    if len(memo) >= 4096:
                        memo.clear()
                    memo[key] = found
            if not found:
                continue
            for v, k, _s, _e in found:
                out.append((v, k, -1, -1))
            # the run itself, line by line: the encoded secret at any alignment
            for line in re.split(r"\\r?\\n|\r?\n", run):
                if len(line) >= 16:
                    out.append((line, found[0][1], -1, -1))

    def _rules(self, text: str, hits: list[int], out: list, cut: bool) -> None:
        hit = set(hits)
        formats: list = []
        for i in hit:
            if i < _N_FORMATS:
                FORMATS[i].find(text, formats)
        if _N_MANGLED in hit:
            for kind, regex in _MANGLED:
                for m in regex.finditer(text):
                    if _random_segment(m.group()):
                        formats.append((m.group(), kind, m.start(), m.end()))
        out.extend(formats)
        if formats and "\n" in text:
            self._wrapped(text, formats, out)
        # where a format found its value: a keyword rule that finds the same text there has
        # nothing to add (the format's kind ranks first), and its checks are skipped
        taken = {(s, e) for _v, _k, s, e in formats}
        if _N_JWT in hit:
            for m in _finditer_from(_JWT, _JWT_LITERAL, text):
                token = m.group()
                if token.count(".") == 2 and len(token) > 60 or JwtTokenDetector.is_formally_valid(token):
                    out.append((token, "jwt", m.start(), m.end()))
                    taken.add(m.span())
        if _N_PEM in hit:
            self._pem(text, out)
        if any(i < _N_FORMATS and FORMATS[i].kind == "aws_access_key" for i in hit):
            self._aws(text, out)
        if _N_URL in hit:
            strict = set()
            for m in _URL.finditer(text):
                strict.add(m.start())
                pw = m.group("pw")
                if pw.lower() in _OAUTH_BASIC:
                    if len(m.group("user")) >= 8:
                        out.append((m.group("user"), "url_password", m.start("user"), m.end("user")))
                    continue
                if not _url_password(pw):
                    continue
                if len(pw) < 8:  # too short to replace alone everywhere: with its user name
                    out.append((f"{m.group('user')}:{pw}", "url_password", m.start("user"), m.end("pw")))
                else:
                    out.append((pw, "url_password", m.start("pw"), m.end("pw")))
                if "%" in pw:
                    out.append((_url_decode(pw), "url_password", -1, -1))
            for m in (_URL_LOOSE.finditer(text) if any(c in text for c in "/?#") else ()):
                pw = m.group("pw")
                if m.start() in strict or not any(c in pw for c in "/?#") or not _url_password(pw):
                    continue
                if _loose_url_password(pw):
                    out.append((pw if len(pw) >= 8 else f"{m.group('user')}:{pw}", "url_password",
                                m.start("pw") if len(pw) >= 8 else m.start("user"), m.end("pw")))
        if _N_KW in hit or _N_CJK in hit or _N_CMD in hit:
            self._keywords(text, out, hit, taken)
        if _N_PGPASS in hit:
            for m in _PGPASS.finditer(text):
                v = m.group("uv")
                if looks_secret(v, quoted=True) or len(v) >= 6 and _url_password(v):
                    out.append((v, "password", m.start("uv"), m.end("uv")))

    def _pem(self, text: str, out: list) -> None:
        pos = 0
        while True:
            m = _PEM_START.search(text, pos)
            if m is None:
                return
            end_m = _PEM_END.search(text, m.end(), m.end() + 65536)
            end = end_m.end() if end_m else _PEM_BODY.match(text, m.end()).end()
            block = text[m.start():end]
            out.append((block, "private_key", m.start(), end))
            for line in _PEM_LINE.finditer(text, m.end(), end_m.start() if end_m else end):
                out.append((line.group(), "private_key", line.start(), line.end()))
            pos = max(end, m.end())

    def _aws(self, text: str, out: list) -> None:
        """A secret key (40 characters of mixed case) near an access key id."""
        ids = [m.start() for m in _AWS_ID.finditer(text)]
        if not ids:
            return
        for m in _AWS_SECRET.finditer(text):
            if _aws_secret_shape(m.group()) and min(abs(m.start() - a) for a in ids) <= 300:
                out.append((m.group(), "aws_secret_key", m.start(), m.end()))

    def _keywords(self, text: str, out: list, hit: set, taken: set = frozenset()) -> None:
        """The keyword, command-line and CJK rules, run only around where
        their needles match (Python's regular expressions are slow over a
        long text; RE2's one pass finds the few places). ``taken``: the spans
        (start, end) where a format found its value."""
        if len(text) <= 2 * _WINDOW or _re2 is None:
            self._keywords_in(text, out, hit, taken)
            return
        merged: list[list[int]] = []
        for m in self.kw_finder.finditer(text):
            a, b = max(0, m.start() - 280), m.end() + _WINDOW
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        seen = set()
        for a, b in merged:
            nl = text.rfind("\n", a, a + 200)  # start at a line's start when one is near
            if nl >= 0:
                a = nl + 1
            found: list = []
            self._keywords_in(text[a:b], found, hit,
                              {(s - a, e - a) for s, e in taken if a <= s and e <= b} if taken else taken)
            for v, k, st, en in found:
                item = (v, k, st + a if st >= 0 else -1, en + a if en >= 0 else -1)
                if item not in seen:
                    seen.add(item)
                    out.append(item)

    def _assignments(self, text: str, low: str, out: list, taken: set = frozenset()) -> None:
        """``NAME = value``, ``"name": "value"``, ``NAME: value`` where NAME
        holds a credential-sounding word (the name is found from the word with
        str.find: a regular expression that looks for names is slow)."""
        seen = set()
        n = len(text)
        for root in _NAME_ROOTS:
            at = low.find(root)
            while at >= 0:
                s = at
                while s > 0 and at - s < 48 and (text[s - 1] in _NAME_CHARS or text[s - 1] == "."):
                    s -= 1
                e = at + len(root)
                while e < n and e - at < 48 and text[e] in _NAME_CHARS:
                    e += 1
                at = low.find(root, e)
                if (s, e) in seen:
                    continue
                seen.add((s, e))
                name = text[s:e].rsplit(".", 1)[-1]
                strict = False
                if not _name_is_secret(name):
                    if not _env_key_name(name.rsplit("-", 1)[-1]):
                        continue
                    strict = True  # FOO_KEY=: only a random value
                m = _AFTER_NAME.match(text, e)
                if m is None or _inside_marker(text, s):
                    continue
                v, vs, ve, quoted = _quoted_value(m)
                if v is None or (not quoted and text[ve:ve + 1] == "(") or ((vs, ve) in taken and "\\" not in v):
                    continue  # a call: token = getToken(...); or a format's value
                if strict and not _random_key(_unquote_value(v) if quoted else v):
                    continue
                self._add_value(v, _keyword_kind(name), vs, ve, quoted, out)

    def _prose(self, text: str, low: str, out: list) -> None:
        """``password is X``, ``token X``: tried where a credential word starts."""
        seen = set()
        for root in ("pass", "pwd", "secret", "token", "key", "credential"):
            at = low.find(root)
            while at >= 0:
                for back in (0, 4, 5, 7, 8):  # api key, auth token, access key, secret key, private key...
                    st = at - back
                    if st < 0 or st in seen or not _starts_token(text, st):
                        continue
                    m = _PROSE.match(text, st)
                    if m is None:
                        continue
                    seen.add(st)
                    raw = m.group("uv")
                    v = raw.strip(_EDGE)
                    if _random_looking(v) and not _inside_marker(text, st):
                        vs = m.start("uv") + raw.index(v)
                        out.append((v, _keyword_kind(m.group("name")), vs, vs + len(v)))
                at = low.find(root, at + len(root))

    def _keywords_in(self, text: str, out: list, hit: set, taken: set = frozenset()) -> None:
        low = text.lower()
        if len(low) != len(text):
            low = None
        if _N_KW in hit:
            if low is not None:
                self._assignments(text, low, out, taken)
                self._prose(text, low, out)
            for m in (_FLAG.finditer(text) if "--" in text else ()):
                name = m.group("name")
                if not _starts_token(text, m.start()) or _NOT_SECRET_SUFFIX.search(name) \
                        or name.lower().endswith(("-stdin", "-file", "-env", "-cmd")):
                    continue
                v, s, e, quoted = _quoted_value(m)
                if v is not None:
                    self._add_value(v, _keyword_kind(name), s, e, quoted, out)
            for m in (_AUTHORIZATION.finditer(text) if low is None or "authorization" in low else ()):
                v = m.group("uv")
                if m.span("uv") not in taken and _starts_token(text, m.start()) and looks_secret(v, quoted=True):
                    out.append((v, "authorization", m.start("uv"), m.end("uv")))
            for m in (_BEARER.finditer(text) if low is None else _finditer_from(_BEARER, "bearer", text, low)):
                v = m.group("uv")
                if m.span("uv") not in taken and _starts_token(text, m.start()) and looks_secret(v, quoted=True):
                    out.append((v, "bearer_token", m.start("uv"), m.end("uv")))
            for m in (_COOKIE.finditer(text) if low is None or "cookie" in low or "-b " in low else ()):
                if not _starts_token(text, m.start(), ""):
                    continue
                group = "pairs" if m.group("pairs") is not None else "cpairs"
                pairs, base = m.group(group), m.start(group)
                for p in _COOKIE_PAIR.finditer(pairs):
                    name, v = p.group("name"), p.group("uv")
                    if name.lower() in ("path", "domain", "expires", "max-age", "samesite"):
                        continue
                    if (_SESSION_COOKIE.search(name) and _url_password(v) and len(v) >= 6) or looks_secret(v):
                        out.append((v, "cookie", base + p.start("uv"), base + p.end("uv")))
                    if m.group()[:4].lower() == "set-":
                        break  # Set-Cookie: the first pair is the cookie, then its attributes
            if low is None or "pwd" in low:
                for m in _CONN_PWD.finditer(text):
                    if not _CONN_KEYS.search(text, max(0, m.start() - 300), m.end() + 300):
                        continue
                    v, s, e = m.group("uv"), m.start("uv"), m.end("uv")
                    if v.startswith("{") and v.endswith("}"):
                        v, s, e = v[1:-1], s + 1, e - 1
                    self._add_value(v, "password", s, e, True, out)
            if "_auth" in text or "auth'" in text or 'auth"' in text:  # (what any match holds)
                for m in _AUTH_LINE.finditer(text):
                    if _basic_auth(m.group("uv")):
                        out.append((m.group("uv"), "basic_auth", m.start("uv"), m.end("uv")))
        if _N_CJK in hit:
            for m in _INTL.finditer(text):
                name, op = m.group("name"), m.group("op").strip()
                if name.isascii() and op not in ("是", "为", "為"):
                    continue  # (token: X, token X: the assignment and prose rules)
                v = m.group("uv").rstrip(".:")
                if (looks_secret(v, quoted=bool(op)) and (op or _has_digit(v) or not v.isalpha())) \
                        or (op and v.isdigit() and len(v) >= 6):
                    kind = "secret" if name.lower() in ("權杖", "токен", "token", "secret") else "password"
                    out.append((v, kind, m.start("uv"), m.start("uv") + len(v)))
            for m in _CJK.finditer(text):
                v = m.group("uv").rstrip(".:")
                op = m.group("op").strip()
                if (looks_secret(v, quoted=bool(op)) and (op or _has_digit(v) or not v.isalpha())) \
                        or (op and v.isdigit() and len(v) >= 6):
                    out.append((v, "password" if m.group("name") not in ("令牌", "トークン", "토큰") else "secret",
                                m.start("uv"), m.start("uv") + len(v)))
        if (_N_CMD in hit or _N_KW in hit) and (low is None or any(c in low for c in _COMMANDS)):
            for m in _CMD_P.finditer(text):
                if not _starts_token(text, m.start(), ""):
                    continue
                v, s, e, quoted = None, -1, -1, False
                if m.group("mv") is not None:
                    v, s, e = m.group("mv"), m.start("mv"), m.end("mv")
                else:
                    for prefix in ("", "s_", "d_", "r_"):
                        try:
                            v, s, e, quoted = _quoted_value(m, prefix)
                        except IndexError:
                            continue
                        if v is not None:
                            break
                if v is not None and _url_password(v) and len(v) >= 4:
                    self._add_value(v, "password", s, e, True, out, min_len=4)
        if (_N_CMD in hit or _N_KW in hit) and (low is None or any(c in low for c in _CMD_WORDS)):
            for regex, word in _CMD_MORE:
                if low is not None and not any(w in low for w in ((word,) if isinstance(word, str) else word)):
                    continue
                groups = regex.groupindex
                for m in regex.finditer(text):
                    v, s, e, quoted = None, -1, -1, True
                    for g in ("dq", "sq", "bq", "eq", "uv", "uv2"):
                        if g in groups and m.group(g) is not None:
                            v, s, e = m.group(g), m.start(g), m.end(g)
                            break
                    if v is not None and _url_password(v) and len(v) >= 4 and not _cmd_word(v):
                        self._add_value(v, "password", s, e, True, out, min_len=4)
            for m in (_HTPASSWD.finditer(text) if low is None or "htpasswd" in low else ()):
                flags = m.group("flags").replace("-", "").replace(" ", "").replace("\t", "")
                args = m.group("args").split()
                if "b" in flags and len(args) >= (2 if "n" in flags else 3):
                    v = args[1] if "n" in flags else args[2]
                    v = v.strip("'\"")
                    if _url_password(v) and len(v) >= 4 and not _cmd_word(v):
                        at = text.find(v, m.start("args"))
                        self._add_value(v, "password", at, at + len(v), True, out, min_len=4)
        if (_N_CMD in hit or _N_KW in hit) and (low is None or "-u" in low or "--user" in low):
            for m in _CURL_USER.finditer(text):
                v = m.group("uv")
                if _starts_token(text, m.start()) and _url_password(v) and not v.startswith("$"):
                    if len(v) < 8:
                        out.append((f"{m.group('user')}:{v}", "password", m.start("user"), m.end("uv")))
                    else:
                        out.append((v, "password", m.start("uv"), m.end("uv")))

    @staticmethod
    def _add_value(v: str, kind: str, s: int, e: int, quoted: bool, out: list, min_len: int = 6) -> None:
        plain = _unquote_value(v) if quoted else v
        if len(plain) < min_len or _MARK in plain:
            return
        if min_len < 6:
            if not _url_password(plain):
                return
        elif not looks_secret(plain, quoted=quoted):
            return
        out.append((v, kind, s, e))
        if plain != v:
            out.append((plain, kind, -1, -1))

    # -- a stored JSON column ----------------------------------------------------

    def scan_json(self, raw: str) -> list[tuple[str, str]]:
        """Every credential value in a JSON text's strings (and keys), read
        decoded; a text that is not JSON is read as text."""
        out: list = []
        if not raw:
            return out
        if not self.row_needles.any(raw):  # (find says which needles each string holds)
            return out
        try:
            value = _loads(raw)
        except ValueError:
            return self.scan(raw)
        self._walk(value, out, None)
        return out

    def _walk(self, value: Any, out: list, key: str | None) -> None:
        if isinstance(value, str):
            self._string(value, out, key)
        elif isinstance(value, list):
            self._list(value, out)
        elif isinstance(value, dict):
            image = value.get("type") == "image"
            for k, v in value.items():
                if k in _OPAQUE or k == _SIGNATURE or (image and k == "data"):
                    if k == _SIGNATURE and isinstance(v, str):
                        self._formats_only(v, out)  # opaque, but a provider's key pasted there is one
                    continue
                if len(k) >= 16:
                    out.extend((v2, k2) for v2, k2, _s, _e in self.find(k))
                self._walk(v, out, k)
            # {"name": "OPENAI_API_KEY", "value": "..."}: environment lists
            name = value.get("name", value.get("key"))
            v = value.get("value")
            if isinstance(name, str) and isinstance(v, str) and _name_is_secret(name) and looks_secret(v, True):
                out.append((v, _keyword_kind(name)))

    def _formats_only(self, value: str, out: list) -> None:
        """The key formats alone (no keyword, no decoding) in an opaque value: a thinking block's
        base64 signature holds none of their prefixes by chance, a key put there does."""
        found: list = []
        for i in self.needles.match(value):
            if i < _N_FORMATS:
                FORMATS[i].find(value, found)
        out.extend((v, k) for v, k, _s, _e in found)

    def _string(self, value: str, out: list, key: str | None, cut: bool = False) -> None:
        for v, k, _s, _e in self.find(value, cut):
            out.append((v, k))
        if key is not None and _name_is_secret(key) and looks_secret(value, quoted=True):
            out.append((value, _keyword_kind(key)))
        elif key is not None and _env_key_name(key) and _random_key(value):
            out.append((value, "secret"))
        elif key in _AUTH_KEYS and _basic_auth(value):
            out.append((value, "basic_auth"))

    def _list(self, items: list, out: list) -> None:
        """Consecutive text (or thinking) blocks are read as one text: a key
        split across two of them is one key, and so are its two pieces."""
        i, n = 0, len(items)
        while i < n:
            item = items[i]
            field = _joinable(item)
            j = i + 1
            if field is not None:
                while j < n and _joinable(items[j]) == field:
                    j += 1
            if field is None or j - i < 2:
                self._walk(item, out, None)
                i += 1
                continue
            texts = [items[x][field] for x in range(i, j)]
            joined = "".join(texts)
            bounds = []
            at = 0
            for t in texts[:-1]:
                at += len(t)
                bounds.append(at)
            for v, k, s, e in self.find(joined):
                out.append((v, k))
                if s >= 0:
                    cuts = [b for b in bounds if s < b < e]
                    if cuts:
                        points = [s, *cuts, e]
                        for a, b in zip(points, points[1:]):
                            if _piece_ok(joined[a:b]):
                                out.append((joined[a:b], k))
            for x in range(i, j):
                rest = {kk: vv for kk, vv in items[x].items() if kk != field}
                self._walk(rest, out, None)
            i = j


def _rows_hit(finder, texts: list[str], sep: str) -> set[int]:
    """The indexes of the ``texts`` in which ``finder`` (RE2) matches, from
    one pass over them all joined by ``sep`` (which no match can span), as
    UTF-8 bytes (offsets in bytes: nothing to convert back to characters)."""
    if not texts:
        return set()
    if _re2 is None:
        return {i for i, t in enumerate(texts) if finder.search(t)}
    from bisect import bisect_right

    parts = [t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass") for t in texts]
    bsep = sep.encode()
    starts = []
    at = 0
    for part in parts:
        starts.append(at)
        at += len(part) + len(bsep)
    return {bisect_right(starts, m.start()) - 1 for m in finder.finditer(bsep.join(parts))}


def _piece_ok(piece: str) -> bool:
    """A piece of a value that may be replaced on its own everywhere: long
    and random enough not to be a word, a format's prefix or a header line."""
    if len(piece) < MIN_PIECE or any(c.isspace() for c in piece):
        return False
    digit, upper, lower, _symbol = _classes(piece)
    return (digit and (upper or lower) or upper and lower) and entropy(piece) >= 2.5


def _joinable(item: Any) -> str | None:
    if isinstance(item, dict):
        t = item.get("type")
        if t == "text" and isinstance(item.get("text"), str):
            return "text"
        if t == "thinking" and isinstance(item.get("thinking"), str):
            return "thinking"
    return None


def _url_decode(text: str) -> str:
    from urllib.parse import unquote

    return unquote(text.replace("+", " ")) if "%" in text else text


# Binary payloads: opaque signatures and encrypted reasoning (and image data, by block type).
# A "signature" (Claude Code's thinking blocks, but also any tool's JSON) is read for the key
# formats alone (Detector._formats_only) and replaced in like any string: a key put there is one.
_OPAQUE = frozenset(("thinkingSignature", "textSignature", "encrypted_content"))
_SIGNATURE = "signature"


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # integers beyond 64 bits; raises ValueError if not JSON


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, allow_nan=True)


# -- the set of values, replaced everywhere ---------------------------------------

# When one value was found with several kinds, the most specific names it.
_GENERIC_KINDS = ("cookie", "authorization", "bearer_token", "url_password", "password", "secret")
MIN_VALUE = 6  # shorter values are never replaced alone (see Detector: a short password goes with its user)
MIN_PIECE = 8  # pieces of a value split across blocks
_SHORT = 12  # values shorter than this are replaced only as a whole word
_CHUNK = 64  # values with no anchor per RE2 program (few: a value with no run of 3 letters or digits)


_SPECIFIC_KINDS = list(dict.fromkeys([f.kind for f in FORMATS] + ["jwt", "private_key", "aws_secret_key"]))


def _kind_rank(kind: str) -> tuple[int, int, str]:
    if kind in _GENERIC_KINDS:
        return (2, _GENERIC_KINDS.index(kind), kind)
    return (0 if kind != "api_key" else 1, _SPECIFIC_KINDS.index(kind) if kind in _SPECIFIC_KINDS else 99, kind)


def _hex(code: int, width: int) -> str:
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{code:0{width}x}")


_JSON_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f", "/": "\\/"}


@functools.lru_cache(maxsize=4096)
def _char_pattern(ch: str) -> str:
    """One character of a value as it may be written: itself, JSON-escaped
    one or two levels deep, \\u-escaped (either case), or %-encoded."""
    alts = [re.escape(ch)]
    esc = _JSON_ESC.get(ch)
    if esc is not None:
        alts.append(re.escape(esc))
        alts.append(re.escape(json.dumps(esc)[1:-1]))
    o = ord(ch)
    if o < 0x10000:
        alts.append(r"\\{1,%d}u" % (2 ** (_ESCAPE_LEVELS - 1)) + _hex(o, 4))
    if ch == " ":
        alts.append(r"\+")
    if o < 0x80:
        alts.append("%" + _hex(o, 2))
    else:
        alts.append("".join("%" + _hex(b, 2) for b in ch.encode("utf-8")))
    return "(?:" + "|".join(alts) + ")"


def _value_pattern(value: str) -> str:
    return "".join(_char_pattern(c) for c in value)


@functools.lru_cache(maxsize=2048)
def _value_regex(value: str):
    """The value in any written form (_value_pattern), for UTF-8 bytes; or
    None when RE2 cannot hold it."""
    pattern = _value_pattern(value)
    if _re2 is None:
        return re.compile(pattern.encode("utf-8", "surrogatepass"))
    options = _re2.Options()
    options.max_mem = 64 << 20
    options.never_capture = True
    try:
        return _re2.compile(pattern.encode("utf-8", "surrogatepass"), options)
    except _re2.error:
        return None


@functools.lru_cache(maxsize=256)
def _written_regex(value: str) -> re.Pattern:
    return re.compile(_value_pattern(value))


def written_at(text: str, value: str) -> tuple[int, int] | None:
    """Where ``value`` first stands in ``text`` in any written form (_value_pattern: as it is,
    JSON- or \\u-escaped, %-encoded), as (start, end) in the text; None if nowhere."""
    at = text.find(value)
    if at >= 0:
        return at, at + len(value)
    m = _written_regex(value).search(text)
    return m.span() if m else None


def _b64_forms(value: str) -> set[str]:
    """The base64 text that stands for ``value`` wherever it sits in a longer
    encoded run: one core per byte alignment (standard and URL-safe)."""
    data = value.encode("utf-8")
    forms = set()
    for skip in (0, 1, 2):
        body = data[skip:]
        body = body[: len(body) // 3 * 3]
        if len(body) >= 9:
            core = base64.b64encode(body).decode()
            forms.add(core)
            forms.add(core.replace("+", "-").replace("/", "_"))
    return forms


# -- which values may be replaced everywhere ----------------------------------------

# A value made of letters alone (and separators) is a word, a name or a key, unless it is long, of
# mixed case and none of its parts reads as a word (each part of three letters or more has a vowel).
_LETTERS = re.compile(r"[A-Za-z][A-Za-z_.$-]*")
_WORD_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


def _wordy(letters: str) -> bool:
    parts = _WORD_PARTS.findall(letters)
    return all(len(p) < 3 or p.isupper() or any(c in "aeiouyAEIOUY" for c in p) for p in parts)


def _key_material(block: str) -> bool:
    """Whether a PEM-looking value holds a body (a line of base64), not only its armour."""
    lines = re.split(r"\\r?\\n|\r?\n", block)
    return any(_PEM_LINE.fullmatch(line.strip()) for line in lines)


def credential_shaped(value: str, kind: str) -> bool:
    """Whether ``value`` may enter the set replaced everywhere: a credential's
    shape, never a key name (``users:``, ``MONGO_URI=``), a label or a word
    (``ConnectionStrings``, a user name), nor a marker (``-----BEGIN``, a
    PEM header with no key in it, ``[REDACTED:...]``). A value of a known
    format (a prefix, a JWT, a PEM block with its body) is; one found beside a
    credential word (password, secret, cookie, a URL's password...) is when
    it has digits or symbols, or is long, of mixed case and reads as no words."""
    if len(value) < MIN_VALUE or _MARK in value:
        return False
    # PEM armour: a block with its key, or a line of one
    if "-----" in value or "PRIVATE KEY" in value or "PuTTY-User-Key" in value:
        return kind == "private_key" and _key_material(value)
    if kind not in _GENERIC_KINDS:
        return True
    core = value[:-1] if value[-1] in ":=" and value[-2:-1] not in ":=" else value  # NAME: and NAME= are keys
    if not _LETTERS.fullmatch(core):
        return True  # digits or symbols in it: the detector judged its shape (looks_secret)
    letters = re.sub(r"[_.$-]", "", core)
    return (core is value and len(letters) >= _SHORT and _mixed_case(letters) and not _wordy(letters)
            and entropy(letters) >= 3.0)


def rewrites_name(value: str, kind: str) -> bool:
    """Whether a value may be replaced inside a name that identifies a server
    or an agent: only a credential's own shape (a known format, or random
    looking: digits and letters, high entropy), never a weaker password that
    happens to equal a user or host name."""
    return kind not in _GENERIC_KINDS or _random_looking(value)


# Columns that name a server or an agent: a value is replaced there only when rewrites_name says so.
NAME_COLUMNS = frozenset(("server", "agent_id"))

# -- finding the values in a text -----------------------------------------------------

# A value is found from its anchors: maximal runs of ASCII letters and digits
# are what every written form of it keeps as they are (JSON and URL encoders
# leave them alone; a \u- or %-encoded run is decoded first). Each value gets
# a forward anchor, the first (up to) 8 characters of one of its runs, and a
# backward anchor, the last 8 of one (the rarest among the set's values, so
# 10,000 JWTs that share their first characters do not share an anchor). A
# text is read in two RE2 passes: runs' starts for the forward anchors, and
# its bytes reversed (runs' ends) for the backward ones. Each pattern is
# bounded by a non-alphanumeric character, so its automaton only ever walks
# one run at a time: its states are the prefixes of anchors the text's runs
# begin with, few, whatever the number of values (an unbounded alternation of
# 100,000 literals thrashes RE2's DFA cache). A value is then verified where
# its anchor says it starts (bytes.startswith), or, when it is not there as
# written (escaped characters in it), with its own pattern around the anchor.
_ANCHOR = 8
_UNESCAPED = frozenset((b"-", b".", b"_", b"~"))  # characters that URL encoders and JSON leave as they are
_MIN_RUN = 3  # shorter runs make no anchor (a value with none is searched for with its pattern)
_RARE = 4  # an anchor shared by more values than this is avoided when the value has another
_RUN = re.compile(rb"[A-Za-z0-9]{%d,}" % _MIN_RUN)
_RUN_ANY = re.compile(rb"[A-Za-z0-9]+")
# Each run's head, its first _ANCHOR bytes (shorter runs whole): every byte but a letter or a digit
# made a space, the text split (all in C: a pattern behind a look-behind is tried at every byte)
_RUNS_ONLY = bytes(b if chr(b).isascii() and chr(b).isalnum() else 32 for b in range(256))
_HEAD = operator.itemgetter(slice(0, _ANCHOR))


def _heads(data: bytes) -> set[bytes]:
    """The head of every run of letters and digits in ``data`` (runs shorter than _MIN_RUN too:
    no anchor is that short)."""
    return set(map(_HEAD, data.translate(_RUNS_ONLY).split()))


_MEMO_TEXT = 160  # texts up to this long: their spans remembered (up to _MEMO_SIZE of them)
_MEMO_SIZE = 65536
_SHORT_TEXT = 1 << 16  # up to this many bytes, a text's runs are read at once (see SecretSet._hits)
_B64_RUN_B = re.compile(_B64_RUN.encode())
_ALNUM = bytes(1 if chr(b).isascii() and chr(b).isalnum() else 0 for b in range(256))


def _bytes_re(pattern: str | bytes, latin1: bool = True, longest: bool = False):
    """A pattern over bytes: Latin-1 (one character per byte: a reversed text too), no captures."""
    if isinstance(pattern, str):
        pattern = pattern.encode()
    if _re2 is None:
        return re.compile(pattern)
    options = _re2.Options()
    options.max_mem = 1 << 30
    options.never_capture = True
    options.longest_match = longest
    if latin1:
        options.encoding = _re2.Options.Encoding.LATIN1
    return _re2.compile(pattern, options)


# An AWS access key id is found glued to other letters and digits too (inside a longer base64 run,
# where no run boundary anchors it): its four-letter prefix is looked for anywhere, and the 20
# characters there looked up. The prefixes are few, so this costs the same for any number of ids.
_GLUED_ID = re.compile(r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}")
_GLUED_PREFIXES = tuple(p.encode() for p in ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA",
                                             "APKA", "AROA", "ASCA"))
_GLUED_LEN = 20
# The last run of a cut text that may be a credential's head (replace_cut_head).
_HEAD_MIN = 8
_TAIL_CHARS = string.ascii_letters + string.digits + "_+/=.~-"  # the characters of that run: str.rstrip finds
# its start (a regular expression ending in \Z would be tried at every position of the text)


_DECODE_NEEDED = _bytes_re(f"(?:{_U_ESCAPE})|(?:{_PERCENTS})")  # \u or %XX escapes may hide anchors
_B64_NEEDED = _bytes_re(_B64_TEXT)  # a base64 run of text: values may be in it decoded
# Either, for rows_hit: one pass over a batch finds the rows that need a closer look for both reasons
_LOOK_CLOSER = _bytes_re(f"(?:{_U_ESCAPE})|(?:{_PERCENTS})|(?:{_B64_TEXT})")


def _char_before(data: bytes, at: int) -> str:
    j = at - 1
    while j > 0 and 0x80 <= data[j] < 0xC0:
        j -= 1
    return data[j:at].decode("utf-8", "ignore")


def _char_after(data: bytes, at: int) -> str:
    return data[at:at + 4].decode("utf-8", "ignore")[:1]


def _place_anchor(anchors: dict, counts: dict, anchor: bytes, place: tuple[int, int]) -> None:
    """_IndexBuild.put: ``place`` (entry, where) under ``anchor``, counted."""
    counts[anchor] = counts.get(anchor, 0) + 1
    got = anchors.get(anchor)
    if got is None:
        anchors[anchor] = [place]
    else:
        got.append(place)


class _IndexBuild:
    """A SecretSet's index, built one value at a time (:meth:`put`), then completed (:meth:`finish`).

    Each value gets a forward anchor at the start of one of its runs and a backward one at the end
    of one (the notes above _ANCHOR). A value of one run has its run's; a value of several chooses,
    once every value is counted (finish), a rare enough one, inside the value, the longest."""

    def __init__(self):
        self.entries: list[tuple[str, bytes, bool, bytes]] = []  # (value, UTF-8, short, longest run); its
        # kind is the set's (SecretSet.kinds: a kind named later needs no change here)
        self.choices: list = []  # values of several runs: their anchors are chosen once all are counted
        self.count_f: dict[bytes, int] = {}
        self.count_b: dict[bytes, int] = {}
        self.forward: dict[bytes, list[tuple[int, int]]] = {}  # anchor -> (entry, where the anchor starts in it)
        self.backward: dict[bytes, list[tuple[int, int]]] = {}  # reversed anchor -> (entry, where it ends in it)
        self.loose: list[int] = []

    def put(self, value: str) -> None:
        """A value added to the set."""
        entries = self.entries
        if len(value) > 4096:  # a whole PEM block: its lines are in the set too
            return
        data = value.encode("utf-8", "surrogatepass")
        i = len(entries)
        short = len(value) < _SHORT
        # (bytes.isalnum: ASCII letters and digits, one run: most keys, no regular expression)
        runs = [(0, len(data))] if len(data) >= _MIN_RUN and data.isalnum() else \
            [m.span() for m in _RUN.finditer(data)]
        if not runs:
            entries.append((value, data, short, b""))
            self.loose.append(i)
            return
        if len(runs) == 1:
            s, e = runs[0]
            run = data[s:e]
            entries.append((value, data, short, run))
            _place_anchor(self.forward, self.count_f, run[:_ANCHOR], (i, s))
            _place_anchor(self.backward, self.count_b, run[-_ANCHOR:][::-1], (i, e))
            return
        s, e = max(runs, key=lambda r: r[1] - r[0])
        entries.append((value, data, short, data[s:e]))
        # (inside: the neighbour on the anchor's side is the value's own character; a run
        # shorter than an anchor must also end (start) inside it, to be a whole run in the text)
        n = len(data)
        fwd = {data[s:min(e, s + _ANCHOR)]: (s, s > 0 and (e - s >= _ANCHOR or e < n)) for s, e in reversed(runs)}
        bwd = {data[max(s, e - _ANCHOR):e][::-1]: (e, e < n and (e - s >= _ANCHOR or s > 0)) for s, e in runs}
        self.choices.append((i, fwd, bwd))
        count_f, count_b = self.count_f, self.count_b
        for a in fwd:
            count_f[a] = count_f.get(a, 0) + 1
        for a in bwd:
            count_b[a] = count_b.get(a, 0) + 1

    def finish(self, into: "SecretSet") -> None:
        """The anchors of the values of several runs chosen, the programs compiled: ``into``'s index."""
        entries, forward, backward = self.entries, self.forward, self.backward
        count_f, count_b = self.count_f, self.count_b

        def pick(options: dict, counts: dict) -> tuple[bytes, int]:
            # rare enough first, then a run inside the value (its neighbour is the value's own
            # character, whatever surrounds the value), then the longest, then the rarest
            a = min(options, key=lambda o: (counts[o] > _RARE, not options[o][1], -len(o), counts[o]))
            return a, options[a][0]

        for i, fwd, bwd in self.choices:
            a, at = pick(fwd, count_f)
            forward.setdefault(a, []).append((i, at))
            if fwd[a][1] and entries[i][1][at - 1:at] in _UNESCAPED:
                # a forward anchor inside the value, after one of its own characters that no JSON or
                # URL writer escapes, finds it glued to letters on its left too: a backward one would
                # find nothing more (and would cost its automaton states, for every value of the set).
                # (After a "/" or a "+", written %2F or %252B, the anchor is glued to a hex digit.)
                continue
            a, at = pick(bwd, count_b)
            backward.setdefault(a, []).append((i, at))
        into._entries = entries
        into._glued = {e[1]: i for i, e in enumerate(entries) if len(e[0]) == _GLUED_LEN and _GLUED_ID.fullmatch(e[0])}
        into._forward, into._backward = forward, backward
        into._lens_f = sorted({len(a) for a in forward}, reverse=True)
        into._lens_b = sorted({len(a) for a in backward}, reverse=True)
        into._keys_f, into._keys_b = frozenset(forward), frozenset(backward)
        into._re_f = SecretSet._anchor_re(forward)
        into._re_b = SecretSet._anchor_re(backward)
        into._loose = loose = self.loose
        into._loose_res = []
        for at in range(0, len(loose), _CHUNK):
            chunk = loose[at:at + _CHUNK]
            source = "|".join(f"(?:{_value_pattern(entries[i][0])})" for i in chunk)
            into._loose_res.append((_bytes_re(source.encode("utf-8", "surrogatepass"), latin1=False), chunk))
        into._ready = True


class SecretSet:
    """Every credential value found in a store, and their replacement in any text.

    Each value is found in any written form: as it is, with any of its
    characters JSON-escaped (one or two levels), \\u-escaped or URL-encoded
    (_value_pattern), and, in a base64 run of text, by its base64 forms. See
    the notes above _ANCHOR: a text costs two RE2 passes whose automata do
    not grow with the number of values, and a look-up per anchor found."""

    def __init__(self, values: Iterable[tuple[str, str]] = ()):
        self.kinds: dict[str, str] = {}  # value -> kind
        self._ready = False
        self._last = None
        self._memo: dict = {}
        self._memo_names: dict = {}
        self._by_text: list[str] | None = None  # the values sorted, for replace_cut_head
        self._heads: frozenset[str] = frozenset()  # and the first _HEAD_MIN characters of each longer one
        self._ix: _IndexBuild | None = None  # the index being built value by value (eager), or None
        self.add_all(values)

    def __len__(self) -> int:
        return len(self.kinds)

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def add(self, value: str, kind: str) -> None:
        """Adds a value found with ``kind`` (and, for a PEM block, its lines), when credential_shaped."""
        value = value.strip()
        if len(value) < MIN_VALUE or _MARK in value:
            return
        pieces = [value]
        if _has_space(value):  # a PEM block: its lines too, wherever they were copied
            pieces += [p for p in re.split(r"\s+", value) if len(p) >= 10 and _piece_ok(p)]
        for piece in pieces:
            old = self.kinds.get(piece)
            if (old is None or (old != kind and _kind_rank(kind) < _kind_rank(old))) \
                    and credential_shaped(piece, kind):
                self.kinds[piece] = kind
                if self._ix is not None and old is None:
                    self._ix.put(piece)
                self._ready = False
                self._last = None
                self._memo, self._memo_names = {}, {}
                self._by_text = None

    def add_all(self, values: Iterable[tuple[str, str]]) -> None:
        for v, k in values:
            self.add(v, k)

    def values(self) -> list[tuple[str, str]]:
        kinds = self.kinds
        return [(v, kinds[v]) for v in self._sorted()]

    def _sorted(self) -> list[str]:
        """The values sorted (once: values() and replace_cut_head both read them; sorting 100,000
        that share their first characters takes a tenth of a second), with the heads of the longer ones."""
        if self._by_text is None:
            self._by_text = sorted(self.kinds)
            self._heads = frozenset(v[:_HEAD_MIN] for v in self._by_text if len(v) > _HEAD_MIN)
        return self._by_text

    def newer(self, values: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Of ``values`` (as this set would hold them: a PEM block's lines too), those this set
        lacks or would replace with another kind's marker: what adding them changes."""
        other = SecretSet(values)
        return sorted((v, k) for v, k in other.kinds.items()
                      if v not in self.kinds or _kind_rank(k) < _kind_rank(self.kinds[v]))

    # -- the index -------------------------------------------------------------------

    def eager(self) -> None:
        """Index each value from now on as it is added, and those it holds now: pass 1 adds them
        while the worker reads the rows, so the index is built on both cores' time instead of after
        pass 1 (100,000 values: a second). The anchors are chosen and the programs compiled on the
        first search, as a set built all at once would (the same index)."""
        if self._ix is None and not self._ready:
            self._ix = _IndexBuild()
            for value in self.kinds:
                self._ix.put(value)

    def _build(self) -> None:
        gc_was = gc.isenabled()
        gc.disable()  # (hundreds of thousands of small objects, none of them cyclic)
        try:
            if self._ix is None:
                self.eager()
            ix, self._ix = self._ix, None
            ix.finish(self)
        finally:
            if gc_was:
                gc.enable()

    @staticmethod
    def _anchor_re(anchors: dict[bytes, list]):
        if not anchors or _re2 is None:
            return None  # (without RE2: the runs of the text are looked up one by one, see _hits)
        return _bytes_re(b"(?s).*?(?:^|[^A-Za-z0-9])(?:" + b"|".join(sorted(anchors)) + b")")

    def ready(self) -> bool:
        """Builds the index now (a process forked after this has it too); whether there are values."""
        return self._ensure()

    def _ensure(self) -> bool:
        if not self.kinds:
            return False
        if not self._ready:
            self._build()
        return True

    # -- one text --------------------------------------------------------------------

    def _glued_hits(self, data: bytes, out: list) -> None:
        """(entry, where it starts) for each known AWS access key id in ``data``, wherever it is."""
        glued = self._glued
        for prefix in _GLUED_PREFIXES:
            at = data.find(prefix)
            while at >= 0:
                i = glued.get(data[at:at + _GLUED_LEN])
                if i is not None:
                    out.append((i, at))
                at = data.find(prefix, at + 1)

    def _hits(self, data: bytes, out: list) -> None:
        """(entry, where it would start) for each anchor at a run's start (forward) or end
        (backward, in the bytes reversed) in ``data``, and each known access key id (_GLUED_ID)."""
        if self._glued:
            self._glued_hits(data, out)
        if _re2 is None:  # each run's head and tail looked up
            for m in _RUN_ANY.finditer(data):
                s, e = m.span()
                for length in self._lens_f:
                    for i, at in self._forward.get(data[s:s + length], ()):
                        out.append((i, s - at))
                for length in self._lens_b:
                    for i, at in self._backward.get(data[max(s, e - length):e][::-1], ()):
                        out.append((i, e - at))
            return
        n = len(data)
        # A short text: one match says whether there is an anchor at all, then each run's head
        # is read at once (findall, set intersection); a long one: RE2 goes from anchor to anchor.
        if self._re_f is not None:
            if n <= _SHORT_TEXT:
                if self._re_f.match(data) is not None:
                    self._place(data, self._keys_f.intersection(_heads(data)), self._forward, out, False)
            else:
                for p in self._run_starts(self._re_f, data):
                    for length in self._lens_f:
                        for i, at in self._forward.get(data[p:p + length], ()):
                            out.append((i, p - at))
        if self._re_b is not None:
            # the values already there as written are found whole below (_spans): the backward
            # anchors are for the others (a value glued, on its left, to letters or digits)
            entries = self._entries
            known = {i for i, at in out if at >= 0 and data.startswith(entries[i][1], at)}
            rev = data[::-1]
            if n <= _SHORT_TEXT:
                if self._re_b.match(rev) is not None:
                    keys = self._keys_b.intersection(_heads(rev))
                    if known:
                        backward = self._backward
                        keys = [k for k in keys if any(i not in known for i, _at in backward[k])]
                    self._place(rev, keys, self._backward, out, True)
            else:
                for q in self._run_starts(self._re_b, rev):
                    for length in self._lens_b:
                        for i, at in self._backward.get(rev[q:q + length], ()):
                            if i not in known:
                                out.append((i, n - q - at))

    @staticmethod
    def _place(data: bytes, keys: set, anchors: dict, out: list, reverse: bool) -> None:
        """Where the anchors ``keys`` (each the head of a run of ``data``) are, with their values."""
        n = len(data)
        for key in keys:
            length = len(key)
            at = data.find(key)
            while at >= 0:
                after = at + length
                # at a run's start; an anchor shorter than _ANCHOR is a whole run
                if (at == 0 or not _ALNUM[data[at - 1]]) and (length >= _ANCHOR or after == n
                                                              or not _ALNUM[data[after]]):
                    for i, where in anchors[key]:
                        out.append((i, n - at - where) if reverse else (i, at - where))
                at = data.find(key, after)

    @staticmethod
    def _run_starts(program, data: bytes, skip=None) -> Iterator[int]:
        """Where the runs that begin with an anchor of ``program`` start. The program is matched
        from ``pos`` (``.*?`` then the anchors): its match ends where an anchor does, and no
        reverse automaton is needed to place its start (one would cost a few states per value).
        ``skip(at)``: where to go on from a match at ``at`` (the next row of a batch), or None: on
        from the match's end."""
        pos = 0
        n = len(data)
        while pos < n:
            m = program.match(data, pos)
            if m is None:
                return
            e = m.end()
            p = e - 1
            while p > 0 and p > e - _ANCHOR and _ALNUM[data[p - 1]]:
                p -= 1
            yield p
            go_on = None if skip is None else skip(p)
            pos = e if go_on is None else go_on

    def _hits_inside(self, data: bytes, out: list) -> None:
        """Also the forward anchors inside runs (a decoded base64 text, where a value may be glued
        to the letters around it: ``xVALUEyy``)."""
        forward = self._forward
        for m in _RUN.finditer(data):
            for p in range(m.start() + 1, m.end() - _MIN_RUN + 1):
                for length in self._lens_f:
                    for i, at in forward.get(data[p:p + length], ()):
                        out.append((i, p - at))

    def _verified(self, data: bytes, hits: list, loose: bool = True) -> tuple[set[int], list[tuple[int, int]]]:
        """Of the hits, the entries there as written ({entry}), and the (entry, where) that are
        not but may be there escaped."""
        entries = self._entries
        found: set[tuple[int, int]] = set()
        escaped: list[tuple[int, int]] = []
        for i, start in hits:
            if start >= 0 and data.startswith(entries[i][1], start):
                found.add((i, start))
            else:
                escaped.append((i, start))
        if loose and self._loose_res:
            for program, _chunk in self._loose_res:
                for m in program.finditer(data):
                    for i in _chunk:
                        if data.startswith(entries[i][1], m.start()):
                            found.add((i, m.start()))
                    escaped.extend((i, m.start()) for i in _chunk)
        return found, escaped

    def _spans(self, text: str, names: bool = False) -> tuple[bytes, list[tuple[int, int, str]]]:
        """The text as UTF-8 and the spans of the values in it (start, end, kind), not overlapping."""
        data = text.encode("utf-8", "surrogatepass")
        entries = self._entries
        hits: list = []
        self._hits(data, hits)
        found, escaped = self._verified(data, hits)
        spans: set[tuple[int, int, int]] = set()
        for i in {i for i, _s in found}:  # every place a value found is at, as written
            value = entries[i][1]
            at = data.find(value)
            while at >= 0:
                spans.add((at, at + len(value), i))
                at = data.find(value, at + 1)
        regex: dict[int, list[tuple[int, int]] | None] = {}  # entry -> windows (None: the whole text)
        if escaped and (b"\\" in data or b"%" in data or b"+" in data):
            for i, start in escaped:
                value_len = len(entries[i][1])
                lo = max(0, start - 9 * value_len - 9) if start >= 0 else 0
                hi = min(len(data), max(start, 0) + 10 * value_len + 9)
                if entries[i][3] and data.find(entries[i][3], lo, hi) < 0:
                    continue  # its longest run, never escaped, is not there: not it
                if not all(data.find(run, lo, hi) >= 0 for run in _RUN.findall(entries[i][1])):
                    continue  # nor is every other run (a look-alike: a value's pattern costs ms to compile)
                windows = regex.setdefault(i, [])
                if windows is not None:
                    windows.append((lo, hi))
        # \u and %XX escapes hide anchors: the text decoded, as a reader of its JSON or URL would
        if _DECODE_NEEDED.search(data):
            plain = text
            for _ in range(_ESCAPE_LEVELS):  # a \u escape inside a JSON string may be escaped again
                if "\\" in plain:
                    plain = _unescape(plain)
            plain_data = _url_decode(plain).encode("utf-8", "surrogatepass")
            more: list = []
            self._hits(plain_data, more)
            for i, _s in self._verified(plain_data, more, loose=True)[0]:
                regex[i] = None
        if regex:
            for i, windows in regex.items():
                program = _value_regex(entries[i][0])
                if program is None:
                    continue
                for lo, hi in (windows or [(0, len(data))]):
                    for m in program.finditer(data, lo, hi):
                        if m.end() > m.start():
                            spans.add((m.start(), m.end(), i))
        # a base64 run of text: the values in it decoded, replaced by their base64 forms
        if _B64_NEEDED.search(data):
            self._base64(data, spans)
        return data, self._choose(data, spans, names)

    def _base64(self, data: bytes, spans: set) -> None:
        entries = self._entries
        values: set[int] = set()
        found = sorted((s, e) for s, e, _i in spans)
        starts = [s for s, _e in found]
        reach = list(itertools.accumulate((e for _s, e in found), max))
        for m in _B64_RUN_B.finditer(data):
            k = bisect.bisect_right(starts, m.start()) - 1
            if k >= 0 and reach[k] >= m.end():
                continue  # inside a value found already (a JWT's parts)
            plain = _b64_text(m.group().decode("ascii"))
            if plain is None:
                continue
            plain_data = plain.encode("utf-8", "surrogatepass")
            hits: list = []
            self._hits(plain_data, hits)
            self._hits_inside(plain_data, hits)
            values.update(i for i, _s in self._verified(plain_data, hits)[0] if len(entries[i][0]) >= 11)
        for i in values:
            for form in _b64_forms(entries[i][0]):
                b = form.encode()
                at = data.find(b)
                while at >= 0:
                    spans.add((at, at + len(b), ~i))  # ~i: a base64 form, replaced inside a word too
                    at = data.find(b, at + 1)

    def _choose(self, data: bytes, spans: set, names: bool) -> list[tuple[int, int, str]]:
        entries = self._entries
        out: list[tuple[int, int, str]] = []
        end = -1
        for s, e, i in sorted(spans, key=lambda x: (x[0], x[0] - x[1])):
            if s < end:
                continue
            value, _data, short, _run = entries[i if i >= 0 else ~i]
            kind = self.kinds[value]
            if i >= 0 and short and (_char_before(data, s).isalnum() or _char_after(data, e).isalnum()):
                continue  # a short value inside a longer word: not it
            if names and not rewrites_name(value, kind):
                continue
            out.append((s, e, kind))
            end = e
        return out

    # -- the interface -----------------------------------------------------------------

    def rows_hit(self, texts: list[str]) -> set[int]:
        """Which of ``texts`` (a batch of rows, each its values joined by
        NUL, which no value holds) hold a value: the anchor passes over the
        batch at once, then a closer look at the few rows that have one."""
        if not texts or not self._ensure():
            return set()
        from bisect import bisect_right

        parts = [t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass") for t in texts]
        joined = b"\x00".join(parts)
        starts = []
        at = 0
        for part in parts:
            starts.append(at)
            at += len(part) + 1
        sure: set[int] = set()  # rows where a value is, as written
        rows: set[int] = set()  # rows to look at closer
        if self._glued:
            glued: list = []
            self._glued_hits(joined, glued)
            sure.update(bisect_right(starts, at) - 1 for _i, at in glued)
        if _re2 is None:
            hits: list = []
            self._hits(joined, hits)
            rows.update(bisect_right(starts, max(0, s)) - 1 for _i, s in hits)
        else:
            # from anchor to anchor; a row where a value is verified is done with
            self._scan_batch(self._re_f, joined, self._forward, self._lens_f, False, starts, sure, rows)
            self._scan_batch(self._re_b, joined, self._backward, self._lens_b, True, starts, sure, rows)
        # rows whose escapes or base64 runs may hide a value, and the values with no anchor:
        # one match per row is enough (a row of CJK text may hold thousands of \u escapes)
        for program in (_LOOK_CLOSER, *(p for p, _c in self._loose_res)):
            pos = 0
            while True:
                m = program.search(joined, pos)
                if m is None:
                    break
                row = bisect_right(starts, m.start()) - 1
                rows.add(row)
                if row + 1 >= len(starts):
                    break
                pos = starts[row + 1]
        return sure | {i for i in rows - sure if self.search(texts[i])}

    def _scan_batch(self, program, joined: bytes, anchors: dict, lengths: list, reverse: bool,
                    starts: list, sure: set, rows: set) -> None:
        """rows_hit's pass over a batch, forward or (``reverse``) over its bytes reversed."""
        if program is None:
            return
        from bisect import bisect_right

        entries = self._entries
        n = len(joined)
        data = joined[::-1] if reverse else joined
        last = len(starts) - 1

        def verdict(p: int) -> int | None:
            row = bisect_right(starts, n - 1 - p if reverse else p) - 1
            ok = any(joined.startswith(entries[i][1], n - p - at if reverse else p - at)
                     for length in lengths for i, at in anchors.get(data[p:p + length], ()))
            if ok or row in sure:
                sure.add(row)
                # on from the next row (reversed: from the one before)
                return (n - starts[row] if row > 0 else n) if reverse else (starts[row + 1] if row < last else n)
            rows.add(row)  # an anchor, its value not there as written: escaped, or not it
            return None

        for _p in self._run_starts(program, data, verdict):
            pass

    def _spans_once(self, text: str, names: bool = False) -> tuple[bytes, list[tuple[int, int, str]]]:
        """_spans, remembered for the last text (a row's column is searched, then replaced)."""
        if len(text) <= _MEMO_TEXT:  # JSON keys, short strings: the same ones again and again
            memo = self._memo_names if names else self._memo
            got = memo.get(text)
            if got is None:
                if len(memo) >= _MEMO_SIZE:
                    memo.clear()
                got = memo[text] = self._spans(text, names)
            return got
        last = self._last
        if last is not None and last[0] is text and last[1] == names:
            return last[2]
        got = self._spans(text, names)
        self._last = (text, names, got)
        return got

    def search(self, text: str) -> bool:
        """Whether any value (in any of its forms) occurs in ``text``."""
        if not text or not self._ensure():
            return False
        return bool(self._spans_once(text)[1])

    def replace(self, text: str, counts: Counter | None = None, names: bool = False) -> tuple[str, Counter]:
        """``text`` with every occurrence of every value replaced; the count per kind.
        ``names``: the text names a server or an agent (only values rewrites_name allows)."""
        if counts is None:
            counts = Counter()
        if not text or not self._ensure():
            return text, counts
        data, spans = self._spans_once(text, names)
        if not spans:
            return text, counts
        out: list[bytes] = []
        pos = 0
        for s, e, kind in spans:
            out.append(data[pos:s])
            out.append(REDACTED.format(kind).encode())
            counts[kind] += 1
            pos = e
        out.append(data[pos:])
        return b"".join(out).decode("utf-8", "surrogatepass"), counts

    def replace_cut_head(self, text: str, counts: Counter | None = None) -> tuple[str, Counter]:
        """``text`` (cut at a length limit) with its last run, when it is the head of a known value
        that the cut went through, replaced: a preview an earlier AgentBase cut inside a
        credential (before it cut before one: parser.cut_text) keeps that credential's head,
        which no whole value matches. Runs of fewer than ``_HEAD_MIN`` characters are left."""
        if counts is None:
            counts = Counter()
        start = self._cut_head(text)
        if start is None:
            return text, counts
        head = text[start:]
        i = bisect.bisect_left(self._by_text, head)
        if i < len(self._by_text) and self._by_text[i] != head and self._by_text[i].startswith(head):
            kind = self.kinds[self._by_text[i]]
            counts[kind] += 1
            return text[:start] + REDACTED.format(kind), counts
        return text, counts

    def _cut_head(self, text: str) -> int | None:
        """Where the last run of ``text`` starts when it may be the head of a value cut short
        (replace_cut_head): _HEAD_MIN characters or more, that some longer value begins with."""
        if not text or not self._ensure():
            return None
        start = len(text.rstrip(_TAIL_CHARS))
        if len(text) - start < _HEAD_MIN:
            return None
        self._sorted()
        return start if text[start:start + _HEAD_MIN] in self._heads else None

    def may_end_in_head(self, text: str) -> bool:
        """Whether replace_cut_head could change ``text`` (a cheap test: most cut texts end in a
        word that no value begins with)."""
        return self._cut_head(text) is not None

    def replace_json(self, text: str, counts: Counter | None = None, look_first: bool = True
                     ) -> tuple[str, Counter, Any]:
        """A JSON text with the values in its strings and keys replaced, still
        valid JSON; also the decoded result (None if not JSON, then replaced as text).
        ``look_first=False``: the text is not searched as a whole before its strings are
        (a caller that knows its row holds a value: the strings' search is the only one)."""
        if counts is None:
            counts = Counter()
        if not text or not self._ensure() or (look_first and not self.search(text)):
            return text, counts, None
        try:
            value = _loads(text)
        except ValueError:
            new, counts = self.replace(text, counts)
            return new, counts, None
        before = sum(counts.values())
        new_value = self._walk(value, counts)
        if not look_first and sum(counts.values()) == before:
            return text, counts, None  # (nothing in it: as when the search finds nothing)
        out = _dumps(new_value)
        return out, counts, new_value

    def _walk(self, value: Any, counts: Counter) -> Any:
        if isinstance(value, str):
            return self.replace(value, counts)[0] if len(value) >= MIN_VALUE else value
        if isinstance(value, list):
            return [self._walk(v, counts) for v in value]
        if isinstance(value, dict):
            image = value.get("type") == "image"
            return {(self.replace(k, counts)[0] if len(k) >= MIN_VALUE else k):
                    (v if k in _OPAQUE or (image and k == "data") else self._walk(v, counts))
                    for k, v in value.items()}
        return value


# -- the store's rows --------------------------------------------------------------

# Columns of JSON text: decoded, their strings read and replaced, encoded again.
JSON_COLUMNS = frozenset(("content_blocks", "tool_calls_json", "raw_json", "header_json", "arguments"))
# Columns cut from a longer text (a credential may be cut short at their end).
CUT_COLUMNS = frozenset(("text_preview", "result_preview", "label", "display_name", "spawned_by"))
# File paths, also read one name at a time.
PATH_COLUMNS = frozenset(("file_path", "rel_path", "cwd", "replaced_by_file", "parent_session"))

def is_json(column: str, value: str) -> bool:
    """A JSON column, or any text that is a JSON object or array (a source's
    request and response columns): read, and replaced, decoded."""
    if column in JSON_COLUMNS:
        return True
    v = value.lstrip()
    return v[:1] in ("{", "[") and value.rstrip()[-1:] in ("}", "]")


_DETECTOR: Detector | None = None


def detector() -> Detector:
    global _DETECTOR
    if _DETECTOR is None:
        _DETECTOR = Detector()
    return _DETECTOR


def detect_row(columns: dict[str, Any], detect: Iterable[str], out: list) -> None:
    """Pass 1 for one row: the credential values in its ``detect`` columns."""
    d = detector()
    short: list[tuple[str, str]] = []
    for column in detect:
        value = columns.get(column)
        if not isinstance(value, str) or not value:
            continue
        if column == "text_preview" and columns.get("content_blocks") is not None:
            continue  # cut from the content, read there
        if is_json(column, value):
            out.extend(d.scan_json(value))  # (not JSON after all: read as text)
        elif column in CUT_COLUMNS or column in PATH_COLUMNS:
            out.extend(d.scan(value, cut=column in CUT_COLUMNS, path=column in PATH_COLUMNS))
        else:
            short.append((column, value))
    # the other text columns of the row, looked at together first (most hold nothing)
    if short and (len(short) == 1 or d.row_needles.any("\n".join(v for _c, v in short))):
        for _column, value in short:
            out.extend(d.scan(value))


def detect_rows(table: str, names: tuple[str, ...], rows: list[tuple], detect: tuple[str, ...]) -> list:
    """Pass 1 for a batch of rows (module level: runs in a worker process).
    Each row's columns, joined, go through one RE2 pass first: most rows hold
    no needle. Values may be bytes (UTF-8, as a SQLite reader gives them
    without decoding them: RE2 reads them as they are)."""
    d = detector()
    at = [names.index(c) for c in detect if c in names]
    out: list = []
    for row in rows:
        values = [row[i] for i in at]
        strings = [v for v in values if isinstance(v, (str, bytes))]
        if not strings:
            continue
        joined = strings[0] if len(strings) == 1 else (
            b"\n".join(v if isinstance(v, bytes) else v.encode() for v in strings)
            if any(isinstance(v, bytes) for v in strings) else "\n".join(strings))
        if not d.row_needles.any(joined):  # (one match is enough: the set's full answer is slower
            continue                          # on a row of many credentials)
        columns = {n: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) for n, v in zip(names, row)}
        detect_row(columns, detect, out)
    return out


def row_text(row: tuple) -> str:
    """A row's text columns joined, for :meth:`SecretSet.rows_hit`."""
    return "\x00".join(v for v in row if isinstance(v, str))


_SECRETS: SecretSet | None = None


def install(values: list[tuple[str, str]]) -> None:
    """A worker's copy of the export's set, ready to search."""
    global _SECRETS
    _SECRETS = SecretSet()
    _SECRETS.kinds = dict(values)  # (the export's set: each value was judged when it entered it)
    _SECRETS._ensure()


def install_set(secrets: SecretSet) -> None:
    """This process's set (the export's main process, and a forked worker)."""
    global _SECRETS
    _SECRETS = secrets


def installed() -> SecretSet:
    return _SECRETS if _SECRETS is not None else SecretSet()


# -- pass 1 over a store ---------------------------------------------------------

_BATCH = 2000


def table_rows(store, table: str, columns: list[str], batch: int = _BATCH, lo: int = 0,
                hi: int | None = None) -> Iterator[tuple[list[str], list[tuple]]]:
    """The rows of ``table`` with ``lo < id <= hi``, by batches: (columns it has, rows)."""
    have = set(store.columns(table))
    cols = [c for c in columns if c in have]
    upper = "" if hi is None else f" AND id <= {int(hi)}"
    select = f"SELECT {', '.join(f'[{c}]' for c in cols)} FROM [{table}] WHERE id > ?{upper} ORDER BY id LIMIT {batch}"
    last = lo
    while True:
        rows = store.tuples(select, (last,))
        if not rows:
            return
        yield cols, rows
        last = rows[-1][0]


class _SqliteReader:
    """Pass 1's reader of a SQLite store: its own read-only connection (a
    worker process has one too), text as UTF-8 bytes (RE2 reads them as
    they are: nothing decoded, nothing encoded again)."""

    def __init__(self, path: str):
        import sqlite3

        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        self.conn.text_factory = bytes

    def columns(self, table: str) -> list[str]:
        return [r[1].decode() if isinstance(r[1], bytes) else r[1]
                for r in self.conn.execute(f"PRAGMA table_info([{table}])")]

    def tuples(self, sql: str, params=()) -> list[tuple]:
        return self.conn.execute(sql.replace("[", '"').replace("]", '"'), params).fetchall()


def _need(detect: tuple[str, ...]) -> list[str]:
    need = ["id"] + [c for c in detect if c != "id"]
    if "text_preview" in detect and "content_blocks" not in need:
        need.append("content_blocks")
    return need


def _detect_table(store, table: str, detect: tuple[str, ...], lo: int = 0, hi: int | None = None) -> dict:
    found: dict[str, str] = {}
    for cols, rows in table_rows(store, table, _need(detect), lo=lo, hi=hi):
        _merge(found, detect_rows(table, tuple(cols), rows, detect))
    return found


def _merge(found: dict, more: Iterable[tuple[str, str]], into: SecretSet | None = None) -> None:
    """Values into ``found`` (value -> kind), each with the first-ranked kind it was found with;
    and each value and kind it keeps into the set ``into``, when one is given."""
    for v, k in more:
        old = found.get(v)
        if old is None or _kind_rank(k) < _kind_rank(old):
            found[v] = k
            if into is not None:
                into.add(v, k)


_READERS: dict[str, "_SqliteReader"] = {}  # the worker's connection to each store, kept between its ranges


def detect_range(path: str, table: str, detect: tuple[str, ...], lo: int, hi: int) -> list[tuple[str, str]]:
    """Pass 1 over the rows lo < id <= hi of a SQLite store's table, in a worker process with a
    connection of its own (module level: picklable)."""
    reader = _READERS.get(path)
    if reader is None:
        reader = _READERS[path] = _SqliteReader(path)
    return list(_detect_table(reader, table, detect, lo, hi).items())


# Pass 1 shares a table of many rows with the worker in ranges of ids, each taken by whichever of the
# two is free (at most _QUEUED handed to the worker ahead): credentials come in clusters (a session
# of pasted keys, each a hundred times slower to read than a line of prose), so a fixed share would
# leave one process most of the work. (Half a batch: a range is one query.)
_STRIPE = _BATCH // 2
_QUEUED = 2
_ADD_STEP = 500  # values added to the set between looks at the worker's queue


def _shared(reader, path: str, pool, table: str, detect: tuple[str, ...], first: int, last: int,
            secrets: SecretSet) -> None:
    """Pass 1 over a table's ids first..last, this process and the worker taking ranges in turn.
    Each range's values go into ``secrets`` in the order of the rows (the set one process would
    make), once it and those before it are read, a few at a time between keeping the worker busy:
    adding them (and indexing them, SecretSet.eager) is this process's work while the worker reads."""
    import sqlite3

    ranges = [(lo, min(lo + _STRIPE, last)) for lo in range(first - 1, last, _STRIPE)]
    sent: dict[int, Any] = {}  # range -> the worker's pending result
    mine: dict[int, dict] = {}  # range -> this process's values, until their turn
    taken = merged = 0  # ranges taken by either process; ranges whose values are in ``items``
    items: deque = deque()  # values read, in the order of the rows, not yet in the set
    found: dict[str, str] = {}  # the table's values so far, each with its first-ranked kind

    def read_in(wait: bool) -> None:
        nonlocal merged
        while merged < taken:
            got = mine.pop(merged, None)
            if got is None:
                result = sent[merged]
                if not wait and not result.ready():
                    return
                try:
                    got = dict(result.get())
                except sqlite3.Error:  # the worker could not read: this process reads the range
                    got = _detect_table(reader, table, detect, *ranges[merged])
                del sent[merged]
                wait = False
            items.extend(got.items())
            merged += 1

    while merged < len(ranges) or items:
        while taken < len(ranges) and sum(1 for r in sent.values() if not r.ready()) < _QUEUED:
            sent[taken] = pool.apply_async(detect_range, (path, table, detect, *ranges[taken]))
            taken += 1
        read_in(False)
        if items:
            _merge(found, (items.popleft() for _ in range(min(len(items), _ADD_STEP))), secrets)
        elif taken < len(ranges):
            mine[taken] = _detect_table(reader, table, detect, *ranges[taken])
            taken += 1
        else:
            read_in(True)  # the worker's last ranges


def collect(store, redact_columns: dict, pool=None) -> SecretSet:
    """Pass 1: every credential value in every column the export redacts, in
    one set. With ``pool`` (a one-process multiprocessing pool) and a SQLite
    store, the worker reads ranges of a large table's ids with its own
    connection while this process reads the others (_shared)."""
    import sqlite3

    secrets = SecretSet()
    sqlite = getattr(store, "kind", "") == "sqlite"
    reader = store
    if sqlite:
        try:
            reader = _SqliteReader(str(store.location))
        except sqlite3.Error:  # (a store this process can read, but not open again read-only)
            sqlite = False
    try:
        for table, detect in redact_columns.items():
            detect = tuple(detect)
            if sqlite and pool is not None:
                first, last = store.tuples(f"SELECT MIN(id), MAX(id) FROM [{table}]")[0]
                if first is not None and last - first > 2 * _BATCH:
                    secrets.eager()
                    _shared(reader, str(store.location), pool, table, detect, first, last, secrets)
                    continue
            secrets.add_all(_detect_table(reader, table, detect).items())
    finally:
        if reader is not store:
            reader.conn.close()
    return secrets


# -- compatibility: one text at a time ---------------------------------------------

def redact_text(text: str, found: Any = None, counts: Counter | None = None) -> tuple[str, Counter | None]:
    """``text`` with the credentials the detector finds in it replaced (every
    occurrence); the count per kind (None when there were none)."""
    values = detector().scan(text)
    if not values:
        return text, counts
    new, c = SecretSet(values).replace(text, counts if counts is not None else Counter())
    return new, (c or None)


def redact_json(text: str, force: bool = False) -> tuple[str, Counter | None, Any]:
    """A JSON text with the credentials in its strings replaced, still valid
    JSON; also the decoded, redacted value (None when nothing was found)."""
    values = detector().scan_json(text)
    if not values:
        return text, None, None
    new, counts, decoded = SecretSet(values).replace_json(text)
    return new, (counts or None), decoded


def total(counts: Counter | None) -> int:
    return sum(counts.values()) if counts else 0


# -- what the store holds (agentbase secrets) ------------------------------------
