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
-a``), ``Cookie:`` headers, URL passwords (an ``@`` inside one too),
``.pgpass`` lines and PEM blocks. A string is also read with its backslash
escapes, ``%XX`` escapes and plausible base64 runs decoded, and adjacent text
blocks are read as one text (a key split across two blocks).

:class:`SecretSet` holds every value found anywhere in the store and replaces
every occurrence of each, in any text: the value as written, with any of its
characters JSON-escaped (``\\"``, ``\\n``, ``\\u0041``, one or two levels
deep) or URL-encoded, its base64 encodings at the three byte alignments, and
the pieces of a value split across blocks. A text is first read, in one
RE2::Set pass, for each value's anchor (a literal piece every form keeps);
only the values found there are then looked for in all their forms. So a
value recognised in one message is gone from every other one too ("the user
pasted X" in a thinking block), including the full-text index, file names,
labels and model names. JSON columns are decoded, their strings replaced and
encoded again: they stay valid JSON.

:func:`collect` (pass 1) runs the detector over every column the export
reads for credentials (export.redact_columns(), from shape.py) and returns the set; the export
then copies every row of every table through :func:`redact_rows` (pass 2).
``agentbase secrets`` (:func:`scan_store`) runs the same two passes without
writing, so it reports exactly the counts the export redacts. See
docs/redaction.md.

Left alone: UUIDs, hex hashes, thinking and text signatures, base64 images
(``data`` of image blocks), ``${VAR}`` and ``<your key>`` placeholders, paths,
numbers, code names (``getPassword()``, ``settings.SECRET_KEY``) and prose.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
import string
from collections import Counter
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
    """Which of many patterns occur in a text: one RE2::Set pass."""

    def __init__(self, patterns: list[str]):
        self.patterns = patterns
        if _re2 is not None:
            options = _re2.Options()
            options.max_mem = 256 << 20
            self._set = _re2.Set.SearchSet(options)
            for p in patterns:
                self._set.Add(p)
            self._set.Compile()
            self._any = _compile("|".join(f"(?:{p})" for p in patterns), capture=False)
        else:
            self._res = [re.compile(p) for p in patterns]

    def match(self, text: str) -> list[int]:
        if _re2 is not None:
            return self._set.Match(text) or []
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
_FILE_NAME = re.compile(r"[\w.-]+\.(?:json|ya?ml|toml|ini|env|txt|md|py|js|ts|sh|conf|cfg|pem|key|crt|log|db|"
                        r"sqlite|pub|ppk|p12|pfx|jks|keystore|gpg|asc|age|html?|css|csv|xml|lock|zip|gz)")
_PATH_OR_HOST = re.compile(r"[\w.-]+(?:/[\w.-]+)+/?|[\w-]+(?:\.[\w-]+)+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _classes(v: str) -> tuple[bool, bool, bool, bool]:
    digit = upper = lower = symbol = False
    for c in v:
        if c.isdigit():
            digit = True
        elif c.isupper():
            upper = True
        elif c.islower():
            lower = True
        else:
            symbol = True
    return digit, upper, lower, symbol


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def looks_secret(value: str, quoted: bool = False) -> bool:
    """Whether the value of a ``password=``/``token:`` assignment looks like a
    credential rather than prose, code, a path, a number or a placeholder."""
    v = value.strip()
    n = len(v)
    if n < 6 or n > 2048 or _MARK in v:
        return False
    if v[0] in "$<{%*([#@&." or "://" in v or v[1:3] == ":\\" or any(c.isspace() for c in v):
        return False
    if v.endswith(("()", "(", ")")) or "${" in v or "{{" in v:
        return False
    if v[0] in "/~" and not (n >= 30 and "." not in v and v.count("/") <= 3 and _aws_secret_shape(v)):
        return False  # a path (a base64 secret may start with a slash too)
    low = v.lower()
    if low in _PLACEHOLDERS or not low.strip("*x•._-#?0") or _CONSTANT.fullmatch(v):
        return False
    if any(word in low for word in _PLACEHOLDER_WORDS):
        return False
    if _NUMERIC.fullmatch(v) or _UUID.fullmatch(v):
        return False
    if not quoted and ((n < 24 and _IDENTIFIER.fullmatch(v)) or _DOTTED.fullmatch(v) or _FILE_NAME.fullmatch(v)):
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
    word in markdown), and of high entropy."""
    if len(v) < min_len or not looks_secret(v):
        return False
    digit, upper, lower, symbol = _classes(v)
    if not (digit and (upper or lower)) and not (upper and lower and (digit or symbol)):
        return False
    if v.isdigit() or _PATH_OR_HOST.fullmatch(v):
        return False
    return entropy(v) >= min(3.0, math.log2(len(v)) - 0.3)


def _aws_secret_shape(value: str) -> bool:
    return (any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() or c in "+/" for c in value))


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


def _mixed_case(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def _url_password(value: str) -> bool:
    """Anything in a URL's password place, but a placeholder (``***``, ``$PASS``, ``<password>``)."""
    return bool(value) and not (value[0] in "$<{%[" or value.lower() in _PLACEHOLDERS
                                or not value.strip("*x•._-#?") or _MARK in value)


# -- credential words ----------------------------------------------------------

# detect-secrets' KeywordDetector names, plus token, api-key, passphrase, credential.
_KEYWORDS = "|".join([k.replace("_?", "[_-]?") for k in _DS_KEYWORDS]
                     + ["token", "api[_-]?key", "apikey", "passphrase", "credentials?", "access[_-]?key",
                        "secret[_-]?key", "client[_-]?secret", "pass"])
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


def _keyword_kind(name: str) -> str:
    low = name.lower()
    return "password" if any(w in low for w in _PASSWORD_WORDS) else "secret"


# -- the detector ----------------------------------------------------------------

def _esc_b(pattern: str) -> str:
    """``pattern`` at the start of a token, or right after a ``\\n``-style escape."""
    return rf"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))(?:{pattern})"


class _Format:
    """A credential with a recognisable shape; the whole token is the value."""

    def __init__(self, kind: str, pattern: str, needle: str, check=None, group: int = 0, cut: str | None = None,
                 start: str | None = None, inside: bool = False):
        self.kind = kind
        # start: what may not come before the token (default: a letter or digit)
        self.regex = re.compile(f"{start}(?:{pattern})" if start else _esc_b(pattern))
        # The needle (RE2): the literal start of the format, at the start of a
        # token (or after a \n escape); a key cut or split in two still has it.
        # (inside: the needle is a part from within the token)
        self.needle = needle if inside else rf"(?:^|[^A-Za-z0-9]|\\[nrt])(?:{needle})"
        self.check = check
        self.group = group
        # The same shape cut short at the end of a text (a 512-character preview, a 255-character label).
        self.cut = re.compile(_esc_b(cut) + r"\Z") if cut else None

    def find(self, text: str, out: list) -> None:
        for m in self.regex.finditer(text):
            value = m.group(self.group)
            if self.check is None or self.check(value):
                out.append((value, self.kind, m.start(self.group), m.end(self.group)))


_T = "A-Za-z0-9_-"
_GITLAB = "glpat|gldt|glft|glsoat|glrt|glrtr|glcbt|glimt|glptt|glagent|gloas|glffct|glnat"  # detect-secrets' and newer
FORMATS = [
    _Format("anthropic_key", rf"sk-ant-[{_T}]{{20,}}", "sk-ant-", cut=rf"sk-ant-[{_T}]{{8,}}"),
    _Format("openai_key", rf"sk-[{_T}]*T3BlbkFJ[{_T}]+", "T3BlbkFJ", inside=True),
    _Format("openai_key", rf"sk-(?:proj|svcacct|admin|None)-[{_T}]{{20,}}", "sk-",
            cut=rf"sk-(?:proj|svcacct|admin)-[{_T}]{{8,}}"),
    _Format("api_key", rf"sk-[{_T}]{{20,}}", "sk-", check=_has_digit),  # DeepSeek, Qwen, OpenRouter, Moonshot...
    _Format("github_token", r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36,}", "gh[pousr]_",
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
    _Format("aws_access_key", rf"(?:{_ds(AWSKeyDetector)})(?![A-Z0-9])",
            "(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}"),
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

_PEM_START = re.compile(r"(?:-{2,5} ?)?(?:" + "|".join(p.pattern for p in PrivateKeyDetector.denylist) + r")[^\r\n\\]*")
_PEM_END = re.compile(r"END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?[ -]*|Private-MAC: *[0-9A-Fa-f]*")
_PEM_BODY = re.compile(r"(?:(?:\r?\n|\\r?\\n)(?:[\w-]+: [^\r\n\\]*|[A-Za-z0-9+/=]+))*")
_PEM_LINE = re.compile(r"[A-Za-z0-9+/=]{16,}")
_JWT = re.compile(_esc_b(r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_+/=-]*)?"))
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
_CJK = re.compile(
    r"(?P<name>密码|口令|密钥|秘钥|令牌|パスワード|暗証番号|トークン|비밀번호|암호|토큰|API ?キー|API ?키)"
    r"(?P<op>(?:[ \t]*(?:是|为|為|：|:|は|が|を|는|은|이|가|=|＝)[ \t]*)+|[ \t]+)"
    r"[\"'`「『“]?(?P<uv>[A-Za-z0-9!@#$%^&*_+\-=.~/?:]{4,256})")
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


def _starts_token(text: str, at: int, also: str = "_-") -> bool:
    """Whether a token starts at ``at``: not right after a letter, a digit or one of ``also``."""
    if at == 0:
        return True
    c = text[at - 1]
    return not (c.isalnum() or c in also)


_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://(?P<user>[^\s/?#:@\"'<>\[\]]*):(?P<pw>[^\s/?#\"'<>]*)@"
                  r"(?P<host>[a-z0-9_.~\[\]-]+)")
_PGPASS = re.compile(r"(?<![\w.:*@\[\]-])(?P<host>[A-Za-z0-9_.*\[\]-]+):(?P<port>\d{1,5}|\*):(?P<db>[\w.*-]+):"
                     r"(?P<user>[\w.*@-]+):(?P<uv>(?:\\:|[^\s:\"'`])+)(?=[\s\"'`]|$)")
# JSON decoding of a string that holds escapes (JSON or shell text inside a tool output)
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
            r"database[_-]?key)")
_PROSE_WORD = (r"(?:password|passwd|passphrase|pwd|secret|token|credentials?|api[ _-]?key|access[ _-]?key|"
               r"secret[ _-]?key|private[ _-]?key|client[ _-]?secret|auth[ _-]?token|access[ _-]?token)")
_KW_NEEDLE = "(?i)" + "|".join([
    # NAME = value, "name": "value", NAME: value (the closing quote may be escaped, the value may follow \n)
    rf"{_KW_WORD}{_SUFFIX}(?:\\*[\"'\]`]){{0,2}}[ \t]*(?:[:=：＝]|%3[ad])[ \t]*(?:\\*[\"'`])?"
    r"[^\s\\\"'`,;(){}\[\]<>]",
    # {"name": "API_KEY", "value": "..."}
    rf"{_KW_WORD}{_SUFFIX}\\*\"[ \t]*,[ \t]*\\*\"value",
    # password is X, token X, the API key for prod: X
    rf"{_PROSE_WORD}(?:[ \t]+(?:for|of|to)[ \t]+[^\s]{{1,40}})?(?:[ \t]+(?:is|was|are|were|->|=>)[ \t]+|[ \t]+)"
    r"[\"'`]?[^\s\"'\\]*[0-9!@#$%^&*+/=_~-]",  # (the value of _random_looking has a digit or a symbol)
    # --password X, --api-key=X
    r"--[a-z0-9-]*(?:password|passwd|passphrase|token|secret|api-?key|auth-key|access-key)[a-z0-9-]*(?:=|[ \t]+)[^\s-]",
    r"authorization[\"']?[ \t]*[:=]", r"bearer[ \t]+[a-z0-9._~+/-]{16}", r"cookie[\"']?[ \t]*[:=]", r"-b[ \t]+[\"']",
])
_NEEDLES = [f.needle for f in FORMATS] + [
    r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+",                   # JWT
    "PRIVATE KEY|PuTTY-User-Key",                            # PEM
    r"://[^\s/?#@]*:[^\s/?#]*@",                             # URL password
    _KW_NEEDLE,                                              # assignments, flags, prose, headers
    "密码|口令|密钥|秘钥|令牌|パスワード|暗証番号|トークン|비밀번호|암호|토큰|API ?キー|API ?키",  # CJK
    r"(?:mysql|mariadb|sshpass|login|redis-cli)[^\n]*\s-[pa]|(?:-u|--user)[= \t]*[^\s:]+:[^\s]",  # command lines
    r"[A-Za-z0-9_.*-]:(?:[0-9]+|\*):[^\s:\"\\]+:[^\s:\"\\]+:[^\s\"\\:]",  # .pgpass
    # decode and look again: a \u escape of a printable character (not of a control one, as in ANSI colours)
    _U_ESCAPE,
]
_N_FORMATS = len(FORMATS)
_WINDOW = 700
_N_JWT, _N_PEM, _N_URL, _N_KW, _N_CJK, _N_CMD, _N_PGPASS, _N_UESC = range(_N_FORMATS, _N_FORMATS + 8)


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


def _texty(data: bytes) -> bool:
    if not data:
        return False
    bad = sum(1 for b in data if b < 9 or 13 < b < 32 or b == 127)
    if bad > len(data) // 50:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 3:  # only a character cut at the end may be incomplete
            return False
        text = data[:exc.start].decode("utf-8")
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


class Detector:
    """Credential values in one decoded string: ``scan(text)`` -> [(value, kind)]."""

    def __init__(self):
        self.needles = _NeedleSet(_NEEDLES)
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
        if depth < 2 and self._b64.search(text):
            self._base64(text, out, depth)
        return out

    def _variant(self, text: str, out: list, cut: bool, again: bool = True) -> None:
        if again and "\\" in text and _ESCAPES.search(text):  # escaped twice: JSON printed inside JSON
            self._variant(_unescape(text), out, cut, False)
        hits = self.needles.match(text)
        if hits:
            found: list = []
            self._rules(text, hits, found, cut)
            out.extend((v, k, -1, -1) for v, k, _s, _e in found)

    def _base64(self, text: str, out: list, depth: int) -> None:
        for m in _B64_RUN_RE.finditer(text):
            run = m.group()
            decoded = _b64_text(run)
            if decoded is None:
                continue
            found = self.find(decoded, depth=depth + 1)
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
        for i in hit:
            if i < _N_FORMATS:
                FORMATS[i].find(text, out)
        if _N_JWT in hit:
            for m in _JWT.finditer(text):
                token = m.group()
                if JwtTokenDetector.is_formally_valid(token) or token.count(".") == 2 and len(token) > 60:
                    out.append((token, "jwt", m.start(), m.end()))
        if _N_PEM in hit:
            self._pem(text, out)
        if any(i < _N_FORMATS and FORMATS[i].kind == "aws_access_key" for i in hit):
            self._aws(text, out)
        if _N_URL in hit:
            for m in _URL.finditer(text):
                pw = m.group("pw")
                if not _url_password(pw):
                    continue
                if len(pw) < 8:  # too short to replace alone everywhere: with its user name
                    out.append((f"{m.group('user')}:{pw}", "url_password", m.start("user"), m.end("pw")))
                else:
                    out.append((pw, "url_password", m.start("pw"), m.end("pw")))
                if "%" in pw:
                    out.append((_url_decode(pw), "url_password", -1, -1))
        if _N_KW in hit or _N_CJK in hit or _N_CMD in hit:
            self._keywords(text, out, hit)
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
        ids = [m.start() for m in _AWS_ID.regex.finditer(text)]
        if not ids:
            return
        for m in _AWS_SECRET.finditer(text):
            if _aws_secret_shape(m.group()) and min(abs(m.start() - a) for a in ids) <= 300:
                out.append((m.group(), "aws_secret_key", m.start(), m.end()))

    def _keywords(self, text: str, out: list, hit: set) -> None:
        """The keyword, command-line and CJK rules, run only around where
        their needles match (Python's regular expressions are slow over a
        long text; RE2's one pass finds the few places)."""
        if len(text) <= 2 * _WINDOW or _re2 is None:
            self._keywords_in(text, out, hit)
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
            self._keywords_in(text[a:b], found, hit)
            for v, k, st, en in found:
                item = (v, k, st + a if st >= 0 else -1, en + a if en >= 0 else -1)
                if item not in seen:
                    seen.add(item)
                    out.append(item)

    def _assignments(self, text: str, low: str, out: list) -> None:
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
                if not _name_is_secret(name):
                    continue
                m = _AFTER_NAME.match(text, e)
                if m is None or _inside_marker(text, s):
                    continue
                v, vs, ve, quoted = _quoted_value(m)
                if v is None or (not quoted and text[ve:ve + 1] == "("):
                    continue  # a call: token = getToken(...)
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

    def _keywords_in(self, text: str, out: list, hit: set) -> None:
        low = text.lower()
        if len(low) != len(text):
            low = None
        if _N_KW in hit:
            if low is not None:
                self._assignments(text, low, out)
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
                if _starts_token(text, m.start()) and looks_secret(v, quoted=True):
                    out.append((v, "authorization", m.start("uv"), m.end("uv")))
            for m in (_BEARER.finditer(text) if low is None or "bearer" in low else ()):
                v = m.group("uv")
                if _starts_token(text, m.start()) and looks_secret(v, quoted=True):
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
        if _N_CJK in hit:
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
        hits = self.row_needles.match(raw)
        if not hits:
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
                if k in _OPAQUE or (image and k == "data"):
                    continue
                if len(k) >= 16:
                    out.extend((v2, k2) for v2, k2, _s, _e in self.find(k))
                self._walk(v, out, k)
            # {"name": "OPENAI_API_KEY", "value": "..."}: environment lists
            name = value.get("name", value.get("key"))
            v = value.get("value")
            if isinstance(name, str) and isinstance(v, str) and _name_is_secret(name) and looks_secret(v, True):
                out.append((v, _keyword_kind(name)))

    def _string(self, value: str, out: list, key: str | None, cut: bool = False) -> None:
        for v, k, _s, _e in self.find(value, cut):
            out.append((v, k))
        if key is not None and _name_is_secret(key) and looks_secret(value, quoted=True):
            out.append((value, _keyword_kind(key)))

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
_OPAQUE = frozenset(("thinkingSignature", "textSignature", "signature", "encrypted_content"))


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
_CHUNK = 400  # values per RE2 program: a larger one outgrows its DFA memory


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
        alts.append(r"\\{1,3}u" + _hex(o, 4))
    if ch == " ":
        alts.append(r"\+")
    if o < 0x80:
        alts.append("%" + _hex(o, 2))
    else:
        alts.append("".join("%" + _hex(b, 2) for b in ch.encode("utf-8")))
    return "(?:" + "|".join(alts) + ")"


_ANCHOR_CHARS = re.compile(r"[A-Za-z0-9._~-]{6,}")  # never escaped by JSON, nor by a URL encoder
_ANCHOR = 8


def _anchor(value: str, extra: str = "._~-") -> str | None:
    """A literal piece of ``value`` that any written form of it holds as it
    is (but a \\u-escaped or wholly %-encoded one): its longest run of
    characters that JSON and URL encoders leave alone, at most 8 of them."""
    runs = _ANCHOR_CHARS.findall(value) if extra else re.findall(r"[A-Za-z0-9]{6,}", value)
    if not runs:
        return None
    best = max(runs, key=len)
    return best[:_ANCHOR]


def _value_pattern(value: str) -> str:
    return "".join(_char_pattern(c) for c in value)


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


class SecretSet:
    """Every credential value found in a store, and their replacement in any text.

    Each value becomes an RE2 pattern that matches it in any written form
    (see _value_pattern), and so does each of its base64 forms. A text is
    first read for the values' anchors (a literal piece of each, in one
    RE2::Set pass that tells which are there, overlapping or not); only the
    few values whose anchor is in the text are then looked for in their
    every form, with a program made of those values alone (cached), so the
    cost of a pass does not grow with the number of values."""

    def __init__(self, values: Iterable[tuple[str, str]] = ()):
        self.kinds: dict[str, str] = {}  # value -> kind
        self._ready = False
        self.add_all(values)

    def __len__(self) -> int:
        return len(self.kinds)

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def add(self, value: str, kind: str) -> None:
        value = value.strip()
        if len(value) < MIN_VALUE or _MARK in value:
            return
        pieces = [value]
        if any(c.isspace() for c in value):  # a PEM block: its lines too, wherever they were copied
            pieces += [p for p in re.split(r"\s+", value) if len(p) >= 10 and _piece_ok(p)]
        for piece in pieces:
            old = self.kinds.get(piece)
            if old is None or _kind_rank(kind) < _kind_rank(old):
                self.kinds[piece] = kind
                self._ready = False

    def add_all(self, values: Iterable[tuple[str, str]]) -> None:
        for v, k in values:
            self.add(v, k)

    def values(self) -> list[tuple[str, str]]:
        return sorted(self.kinds.items())

    def newer(self, values: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Of ``values`` (as this set would hold them: a PEM block's lines too), those this set
        lacks or would replace with another kind's marker: what adding them changes."""
        other = SecretSet(values)
        return sorted((v, k) for v, k in other.kinds.items()
                      if v not in self.kinds or _kind_rank(k) < _kind_rank(self.kinds[v]))

    def _build(self) -> None:
        entries: list[tuple[int, str, str, bool]] = []  # (length, pattern, kind, short)
        anchored: dict[str, list[int]] = {}
        always: list[int] = []

        def entry(length: int, pattern: str, kind: str, short: bool, anchor: str | None) -> None:
            entries.append((length, pattern, kind, short))
            if anchor is None:
                always.append(len(entries) - 1)
            else:
                anchored.setdefault(anchor, []).append(len(entries) - 1)

        for value, kind in self.kinds.items():
            if len(value) > 4096:  # a whole PEM block: its lines are in the set too
                continue
            anchor = _anchor(value)
            entry(len(value), _value_pattern(value), kind, len(value) < _SHORT, anchor)
            if len(value) >= 11:
                # (its base64 forms: found by the value's anchor in the base64 runs, decoded)
                for form in _b64_forms(value):
                    entry(len(form), re.escape(form), kind, False, anchor)
        self._entries = entries
        self._anchors = list(anchored)
        self._anchored = [anchored[a] for a in self._anchors]
        self._always = always
        # RE2::Set patterns: the anchors, the three forms that hide them, then the values that have none
        patterns = [re.escape(a) for a in self._anchors] + [_U_ESCAPE, _PERCENTS, _B64_TEXT] + \
            [entries[i][1] for i in always]
        self._n_anchors = len(self._anchors)
        if _re2 is not None:
            options = _re2.Options()
            options.max_mem = 256 << 20
            self._set = _re2.Set.SearchSet(options)
            for pattern in patterns:
                self._set.Add(pattern)
            self._set.Compile()
        else:
            self._set = [re.compile(p) for p in patterns]
        # whether a batch of rows holds any anchor at all: one search of them all
        self._any = _compile("|".join(f"(?:{p})" for p in patterns), capture=False, longest=True)
        self._cache: dict[tuple[int, ...], list] = {}
        self._ready = True

    def _match(self, text: str) -> list[int]:
        if _re2 is not None:
            return self._set.Match(text) or []
        return [i for i, r in enumerate(self._set) if r.search(text)]

    def _candidates(self, text: str) -> tuple[int, ...]:
        """The entries whose anchor is in ``text``, or in it with its \\u and
        %XX escapes decoded when it has such escapes (they hide anchors)."""
        hits = self._match(text)
        out: set[int] = set()
        n = self._n_anchors
        decoded: list[str] = []
        for i in hits:
            if i < n:
                out.update(self._anchored[i])
            elif i == n or i == n + 1:  # \\u or %XX escapes: the anchors may be in the text decoded
                if not decoded:
                    plain = text
                    for _ in range(2):  # a \\u escape inside a JSON string is escaped once more
                        if "\\" in plain:
                            plain = _unescape(plain)
                    decoded.append(_url_decode(plain))
            elif i == n + 2:  # a base64 run of text: the anchors may be in it decoded
                for m in _B64_RUN_RE.finditer(text):
                    plain = _b64_text(m.group())
                    if plain is not None:
                        decoded.append(plain)
            else:
                out.add(self._always[i - n - 3])
        for plain in decoded:
            for i in self._match(plain):
                if i < n:
                    out.update(self._anchored[i])
                elif i >= n + 3:
                    out.add(self._always[i - n - 3])
        return tuple(sorted(out))

    def _programs(self, candidates: tuple[int, ...]) -> list:
        """Programs (RE2, a group per entry) for these entries, longest
        first so that an alternation prefers them; cached."""
        programs = self._cache.get(candidates)
        if programs is None:
            chosen = sorted(candidates, key=lambda i: -self._entries[i][0])
            programs = []
            for at in range(0, len(chosen), _CHUNK):
                chunk = [self._entries[i] for i in chosen[at:at + _CHUNK]]
                source = "|".join(f"({p})" for _n, p, _k, _s in chunk)
                programs.append((_compile(source), [(k, s) for _n, _p, k, s in chunk]))
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[candidates] = programs
        return programs

    def rows_hit(self, texts: list[str]) -> set[int]:
        """Which of ``texts`` (a batch of rows, each its values joined by
        NUL, which no value holds) hold a value: one RE2 pass over the batch
        for the anchors, then a closer look at the few rows that have one."""
        if not self.kinds:
            return set()
        if not self._ready:
            self._build()
        return {i for i in _rows_hit(self._any, texts, "\x00") if self.search(texts[i])}

    def search(self, text: str) -> bool:
        """Whether any value (in any of its forms) occurs in ``text``."""
        if not self.kinds:
            return False
        if not self._ready:
            self._build()
        if not text:
            return False
        candidates = self._candidates(text)
        return bool(candidates) and any(p.search(text) is not None for p, _i in self._programs(candidates))

    def replace(self, text: str, counts: Counter | None = None) -> tuple[str, Counter]:
        """``text`` with every occurrence of every value replaced; the count per kind."""
        if counts is None:
            counts = Counter()
        if not self.kinds or not text:
            return text, counts
        if not self._ready:
            self._build()
        candidates = self._candidates(text)
        if not candidates:
            return text, counts
        for program, info in self._programs(candidates):
            out: list[str] = []
            pos = 0
            for m in program.finditer(text):
                start, end = m.span()
                kind, short = info[m.lastindex - 1]
                if short and ((start > 0 and text[start - 1].isalnum()) or (end < len(text) and text[end].isalnum())):
                    continue  # a short value inside a longer word: not it
                out.append(text[pos:start])
                out.append(REDACTED.format(kind))
                counts[kind] += 1
                pos = end
            if out:
                out.append(text[pos:])
                text = "".join(out)
        return text, counts

    def replace_json(self, text: str, counts: Counter | None = None) -> tuple[str, Counter, Any]:
        """A JSON text with the values in its strings and keys replaced, still
        valid JSON; also the decoded result (None if not JSON, then replaced as text)."""
        if counts is None:
            counts = Counter()
        if not self.search(text):
            return text, counts, None
        try:
            value = _loads(text)
        except ValueError:
            new, counts = self.replace(text, counts)
            return new, counts, None
        new_value = self._walk(value, counts)
        out = _dumps(new_value)
        return out, counts, new_value

    def _walk(self, value: Any, counts: Counter) -> Any:
        if isinstance(value, str):
            return self.replace(value, counts)[0] if self.search(value) else value
        if isinstance(value, list):
            return [self._walk(v, counts) for v in value]
        if isinstance(value, dict):
            image = value.get("type") == "image"
            return {(self.replace(k, counts)[0] if len(k) >= MIN_VALUE and self.search(k) else k):
                    (v if k in _OPAQUE or (image and k == "data") else self._walk(v, counts))
                    for k, v in value.items()}
        return value


# -- the store's rows --------------------------------------------------------------

# Columns of JSON text: decoded, their strings read and replaced, encoded again.
JSON_COLUMNS = frozenset(("content_blocks", "tool_calls_json", "raw_json", "header_json", "arguments"))
# Columns cut from a longer text (a credential may be cut short at their end).
CUT_COLUMNS = frozenset(("text_preview", "result_preview", "label", "display_name", "spawned_by"))
# File paths, also read one name at a time.
PATH_COLUMNS = frozenset(("file_path", "cwd", "replaced_by_file", "parent_session"))

def _is_json(column: str, value: str) -> bool:
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
        if _is_json(column, value):
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
        if not d.row_needles.match(joined):
            continue
        columns = {n: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) for n, v in zip(names, row)}
        detect_row(columns, detect, out)
    return out


def counted(table: str, column: str, columns: dict[str, Any], redact_columns: dict) -> bool:
    """Whether replacements in this column count (the redactions table): the
    columns the detector reads, but a preview cut from a message's content."""
    if column not in redact_columns.get(table, ()):
        return False
    return not (column == "text_preview" and columns.get("content_blocks") is not None)


def row_text(row: tuple) -> str:
    """A row's text columns joined, for :meth:`SecretSet.rows_hit`."""
    return "\x00".join(v for v in row if isinstance(v, str))


def _batch_texts(rows: list[tuple]) -> list[str]:
    """Each row's values joined by NUL, without a Python step per value
    (numbers come along as digits: no value of the set is a number)."""
    return ["\x00".join(map(str, filter(None, row))) for row in rows]


def redact_rows(secrets: SecretSet, table: str, names: tuple[str, ...], rows: list[tuple],
                redact_columns: dict) -> dict[int, tuple[dict, list, Any]]:
    """Pass 2 for a batch: {index in rows: redact_row's result} for the rows
    that hold a value (found with one RE2 pass over the batch)."""
    out = {}
    for i in sorted(secrets.rows_hit(_batch_texts(rows))):
        got = redact_row(secrets, table, names, rows[i], redact_columns, checked=True)
        if got is not None:
            out[i] = got
    return out


def redact_row(secrets: SecretSet, table: str, names: tuple[str, ...], row: tuple,
               redact_columns: dict, checked: bool = False) -> tuple[dict, list, Any] | None:
    """Pass 2 for one row: ``(patch {column: new value}, [(column, Counter)]
    counted, decoded content or None)``, or None when the row holds no value.
    ``checked``: the row is known to hold one (see redact_rows)."""
    if not checked and not secrets.search(row_text(row)):
        return None
    from . import parser as P

    columns = dict(zip(names, row))
    patch: dict = {}
    found: list = []
    decoded_content = None
    decoded_raw = None
    for column, value in columns.items():
        if not isinstance(value, str) or not secrets.search(value):
            continue
        if _is_json(column, value):
            new, counts, decoded = secrets.replace_json(value)
            if column == "content_blocks":
                decoded_content = decoded
            elif column == "raw_json":
                decoded_raw = decoded
        else:
            new, counts = secrets.replace(value)
        if new != value:
            patch[column] = new
        if counts and counted(table, column, columns, redact_columns):
            found.append((column, counts))
    # Previews again from the replaced text: a value cut by the 512th character is gone whole.
    if table == "messages" and "content_blocks" in patch and decoded_content is not None:
        fresh = P.text_preview({"content": decoded_content})
        if fresh is not None:
            patch["text_preview"] = fresh
    if table == "entries" and "raw_json" in patch and isinstance(decoded_raw, dict):
        fresh = P.entry_preview(decoded_raw)
        if fresh is not None or columns.get("text_preview") is not None:
            patch["text_preview"] = fresh
    return patch, found, decoded_content


_SECRETS: SecretSet | None = None


def install(values: list[tuple[str, str]]) -> None:
    """A worker's copy of the export's set, ready to search."""
    global _SECRETS
    _SECRETS = SecretSet(values)
    _SECRETS.search("")


def install_set(secrets: SecretSet) -> None:
    """This process's set (the export's main process, and a forked worker)."""
    global _SECRETS
    _SECRETS = secrets


def installed() -> SecretSet:
    return _SECRETS if _SECRETS is not None else SecretSet()


# -- pass 1 over a store ---------------------------------------------------------

_BATCH = 2000


def _table_rows(store, table: str, columns: list[str], batch: int = _BATCH, lo: int = 0,
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
    for cols, rows in _table_rows(store, table, _need(detect), lo=lo, hi=hi):
        for v, k in detect_rows(table, tuple(cols), rows, detect):
            if v not in found or _kind_rank(k) < _kind_rank(found[v]):
                found[v] = k
    return found


def detect_range(path: str, table: str, detect: tuple[str, ...], lo: int, hi: int) -> list[tuple[str, str]]:
    """Pass 1 over the rows lo < id <= hi of a SQLite store's table, in a
    worker process with its own connection (module level: picklable)."""
    reader = _SqliteReader(path)
    try:
        return list(_detect_table(reader, table, detect, lo, hi).items())
    finally:
        reader.conn.close()


def collect(store, redact_columns: dict, pool=None) -> SecretSet:
    """Pass 1: every credential value in every column the export redacts, in
    one set. With ``pool`` (a one-process multiprocessing pool) and a SQLite
    store, the worker reads the second half of the messages with its own
    connection while this process reads the rest."""
    import sqlite3

    secrets = SecretSet()
    pending = None
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
            lo, hi = 0, None
            if pending is None and pool is not None and table == "messages" and sqlite:
                first, last = store.tuples("SELECT MIN(id), MAX(id) FROM messages")[0]
                if first is not None and last - first > 2 * _BATCH:
                    hi = (first + last) // 2
                    split = (detect, hi, last)
                    pending = pool.apply_async(detect_range, (str(store.location), table, detect, hi, last))
            secrets.add_all(_detect_table(reader, table, detect, lo, hi).items())
        if pending is not None:
            try:
                secrets.add_all(pending.get())
            except sqlite3.Error:  # the worker could not read: this process reads its half
                secrets.add_all(_detect_table(reader, "messages", split[0], split[1], split[2]).items())
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

# The row's label column in the report, per table.
_LABELS = {"messages": "message_uuid", "entries": "entry_uuid", "entry_revisions": "entry_uuid",
           "sessions": "session_uuid", "tool_calls": "call_id", "parsed_files": "file_path",
           "session_index": "session_key"}
_SESSION_ID = {"sessions": "id", "messages": "session_id", "entries": "session_id", "entry_revisions": "session_id",
               "tool_calls": "session_id"}


def scan_store(store, redact_columns: dict | None = None) -> dict:
    """Every credential the export would redact, found by reading the store
    with the export's two passes (the same detector, the same set, the same
    counting): ``{"total", "kinds": {kind: count}, "places": [{server, agent,
    session, table, id, entry, column, kind, count}]}``. Values are never kept."""
    if redact_columns is None:
        from .shape import redact_columns as columns

        redact_columns = columns()
    secrets = collect(store, redact_columns)
    sessions = {r[0]: (r[1], r[2], r[3])
                for r in store.query("SELECT id, server, agent_id, session_uuid FROM sessions")}
    places: list[dict] = []
    kinds: Counter = Counter()
    if not secrets:
        return {"total": 0, "kinds": {}, "places": []}
    for table, detect in redact_columns.items():
        have = set(store.columns(table))
        sid = _SESSION_ID.get(table)
        label = _LABELS.get(table, "id")
        need = ["id"] + [c for c in (sid, label, "server", "agent_id", "content_blocks", *detect)
                         if c and c in have and c != "id"]
        need = list(dict.fromkeys(need))
        for cols, rows in _table_rows(store, table, need):
            names = tuple(cols)
            for row in rows:
                values = dict(zip(names, row))
                part = tuple(c for c in names if c in detect)
                got = redact_row(secrets, table, part, tuple(values[c] for c in part), redact_columns)
                if got is None:
                    continue
                for column, counts in got[1]:
                    server, agent, session = sessions.get(values.get(sid) if sid else None, (None, None, None))
                    if table == "session_index" or table == "parsed_files":
                        server, agent = values.get("server"), values.get("agent_id")
                    # (a label may hold a value too: a file name, a session id taken from one)
                    server, agent, session, entry = (secrets.replace(x)[0] if isinstance(x, str) else x
                                                     for x in (server, agent, session, values.get(label)))
                    for kind, n in counts.items():
                        kinds[kind] += n
                        places.append({"server": server, "agent": agent, "session": session, "table": table,
                                       "id": values["id"], "entry": entry, "column": column,
                                       "kind": kind, "count": n})
    return {"total": sum(kinds.values()), "kinds": dict(kinds.most_common()), "places": places}


def format_findings(found: dict) -> str:
    """The text report of :func:`scan_store`: kinds, then places."""
    if not found["total"]:
        return "no credentials found"
    lines = [f"{found['total']} credentials in {len(found['places'])} places (values not shown):", ""]
    width = max(len(k) for k in found["kinds"])
    lines.append(f"{'kind':<{width}}  count")
    lines += [f"{kind:<{width}}  {n:>5}" for kind, n in found["kinds"].items()]
    lines.append("")
    header = ("server", "agent", "session", "table.column", "id", "entry", "kind", "count")
    table = [header] + [
        (str(p["server"]), str(p["agent"]), str(p["session"]), f"{p['table']}.{p['column']}", str(p["id"]),
         str(p["entry"]), p["kind"], str(p["count"]))
        for p in found["places"]
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    return "\n".join(lines)
