"""A planted corpus of made-up credentials, and a corpus of look-alikes.

Every value is generated here (random characters behind the right prefix and
of the right length): none is a real credential. ``plants(rng)`` gives one
fresh value of every class issue #12 lists (and of every format the detector
knew before), and of every class section 3 of issue #22 lists (``issue=22``); ``build(root)`` writes OpenClaw transcripts that put every
class in every field (message text, thinking, tool arguments, tool results,
JSON inside text, error messages, custom / custom_message / compaction /
label entries, sessions.json label, displayName and spawnedBy, cwd, file
names, model names, tool names, custom types) and returns what was planted
where. ``LOOK_ALIKES`` are strings that must come through untouched.

Run it as a script to write a corpus somewhere and see its size:
``python3 tests/secret_corpus.py /tmp/corpus``.
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from transcripts import Chain, header, sessions_dir, write  # noqa: E402

AN = string.ascii_letters + string.digits
LOWER_AN = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = AN + "+/"
URLSAFE = AN + "-_"


def fake(rng: random.Random, alphabet: str, n: int) -> str:
    """n random characters, at least one digit, one lower and one upper case
    letter where the alphabet has them (so no value looks like a word)."""
    while True:
        v = "".join(rng.choice(alphabet) for _ in range(n))
        need = [set(string.digits), set(string.ascii_lowercase), set(string.ascii_uppercase)]
        if all(not (s & set(alphabet)) or (s & set(v)) for s in need) or n < 6:
            return v


def password(rng: random.Random, n: int = 14) -> str:
    """A password a person might choose: letters, digits and a symbol."""
    return fake(rng, AN, n - 2) + rng.choice("!#%^*") + rng.choice(string.digits)


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


def _u_escape(value: str, every: int = 1) -> str:
    """``value`` with every ``every``-th character written as \\uXXXX."""
    return "".join(f"\\u{ord(c):04x}" if i % every == 0 else c for i, c in enumerate(value))


@dataclass
class Plant:
    cls: str  # the class of issue #12 (or an older format)
    text: str  # how it is written
    values: list[str]  # what must not survive, nor any 10-character piece of it
    encoded: list[str] = field(default_factory=list)  # encoded forms that must not survive either
    one_line: bool = True  # fits a file name or a path
    label_ok: bool = False  # not one line of prose, but fits a label
    issue: int = 12  # the issue that listed the class (22: section 3's, what real users paste)

    def short(self, limit: int, path: bool = False) -> bool:
        return (self.one_line or (self.label_ok and not path)) and len(self.text) <= limit and "\n" not in self.text


def plants(rng: random.Random) -> list[Plant]:
    """One fresh value of every class."""
    out: list[Plant] = []

    def add(cls, text, *values, encoded=(), one_line=None):
        out.append(Plant(cls, text, list(values), list(encoded),
                         one_line if one_line is not None else "\n" not in text))

    # -- formats recognised before (kept) --
    v = "sk-proj-" + fake(rng, AN + "-_", 56) + "7"
    add("openai_project_key", f"export OPENAI_API_KEY={v}", v)
    v = "sk-" + fake(rng, AN, 20) + "T3BlbkFJ" + fake(rng, AN, 20)
    add("openai_legacy_key", f"old key {v} still works", v)
    v = "sk-ant-api03-" + fake(rng, AN + "-_", 93) + "AA"
    add("anthropic_key", f"ANTHROPIC_API_KEY={v}", v)
    v = "sk-" + fake(rng, HEX, 31) + "9"
    add("sk_provider_key", f"deepseek key {v}", v)
    v = "AIzaSy" + fake(rng, AN + "-_", 33)
    add("google_api_key", f"GOOGLE_API_KEY={v}", v)
    v = "ghp_" + fake(rng, AN, 36)
    add("github_token_in_url", f"git remote set-url origin https://{v}@github.com/me/repo.git", v)
    v = "github_pat_" + fake(rng, AN, 22) + "_" + fake(rng, AN, 59)
    add("github_fine_grained", f"fine-grained {v}", v)
    v = "glpat-" + fake(rng, AN, 20)
    add("gitlab_token", f"GITLAB_TOKEN {v}", v)
    v = f"xoxb-{fake(rng, string.digits, 11)}-{fake(rng, string.digits, 13)}-{fake(rng, AN, 24)}"
    add("slack_token", f"slack bot {v}", v)
    v = f"https://hooks.slack.com/services/T{fake(rng, string.ascii_uppercase + string.digits, 10)}/" \
        f"B{fake(rng, string.ascii_uppercase + string.digits, 10)}/{fake(rng, AN, 24)}"
    add("slack_webhook", f"webhook: {v}", v.rsplit("/", 1)[1])
    v = fake(rng, "123456789", 10) + ":AA" + fake(rng, AN + "_-", 33)
    add("telegram_bot_token", f"curl https://api.telegram.org/bot{v}/getMe", v)
    v = "M" + fake(rng, AN, 23) + "." + fake(rng, AN, 6) + "." + fake(rng, AN + "_-", 27)
    add("discord_bot_token", f"discord token {v}", v)
    key_id = "AKIA" + fake(rng, string.ascii_uppercase + string.digits, 16)
    key = fake(rng, B64, 37) + "Ab1"
    add("aws_keys", f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {key}", key_id, key)
    payload = _b64url({"sub": fake(rng, AN, 12), "iat": 1775354400})
    sig = fake(rng, URLSAFE, 43)
    v = _b64url({"alg": "HS256", "typ": "JWT"}) + "." + payload + "." + sig
    add("jwt", f"session cookie {v}", payload, sig)
    body = [fake(rng, B64, 64) for _ in range(5)]
    add("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END OPENSSH PRIVATE KEY-----",
        *body)
    v = password(rng, 12)
    add("env_password", f"DB_PASSWORD={v}", v)
    v = fake(rng, AN, 24)
    add("token_assignment", f"token: {v}", v)
    v = fake(rng, AN, 16)
    add("quoted_secret", f'client_secret = "{v}"', v)
    v = fake(rng, AN, 18)
    add("json_api_key", f'{{"api_key": "{v}", "model": "gpt"}}', v)
    v = fake(rng, AN, 40)
    add("authorization_header", f"curl -H 'Authorization: Bearer {v}' https://api.example.com/v1", v)
    v = fake(rng, AN, 14)
    add("url_password", f"DATABASE_URL=postgres://admin:{v}@db.example.com:5432/app", v)
    v = password(rng, 12)
    add("mysql_p_attached", f"mysql -uroot -p{v} app < dump.sql", v)
    v = "sk_live_" + fake(rng, AN, 24)
    add("stripe_key", f"stripe {v}", v)
    v = "SG." + fake(rng, AN, 22) + "." + fake(rng, AN, 43)
    add("sendgrid_key", f"sendgrid {v}", v)
    v = "npm_" + fake(rng, AN, 36)
    add("npm_token", f"//registry.npmjs.org/:_authToken={v}", v)
    v = password(rng, 16)
    add("cjk_fullwidth_colon", f"密码：{v}", v)
    v = password(rng, 14)
    add("password_flag", f"backup --password {v} --host db", v)

    # -- JSON inside text or tool output --
    v = password(rng, 18)
    add("json_in_text", f'the config is {{"api_key": "{v}", "region": "eu"}} as you asked', v)
    v = password(rng, 16)
    add("cat_config_json", 'cat config.json\n{\n  "db": {\n    "host": "db.internal",\n'
        f'    "password": "{v}"\n  }}\n}}', v)
    v = fake(rng, AN, 26)
    add("escaped_json_in_text", f'{{\\"token\\": \\"{v}\\", \\"ttl\\": 3600}}', v)
    # -- after a \n escape, after %3D, \u escapes --
    v = "ghp_" + fake(rng, AN, 36)
    add("after_n_escape", f'printf "deploy\\n{v}\\n" | gh auth login --with-token', v)
    v = password(rng, 20)
    add("after_percent_3d", f"GET /login?user=bob&password%3D{v}%26next%3D%2Fhome HTTP/1.1", v)
    v = "sk-proj-" + fake(rng, AN, 48)
    add("u_escaped_every_char", f'{{"openai_key": "{_u_escape(v)}"}}', v, encoded=[_u_escape(v)[:60]])
    v = "ghp_" + fake(rng, AN, 36)
    add("u_escaped_some_chars", f'{{"token": "{_u_escape(v, 3)}"}}', v)
    # -- taken in part before --
    v = "sk_live_" + fake(rng, AN, 99)
    add("long_sk_live", f"STRIPE_SECRET_KEY is {v}", v)
    v = "rk_live_" + fake(rng, AN, 99)
    add("long_rk_live", f"restricted key {v}", v)
    v = fake(rng, AN, 8) + "@" + fake(rng, AN, 9) + "!"
    add("url_password_with_at", f"psql postgresql://app:{v}@db.example.com:5432/app", v)
    v = "N" + fake(rng, AN, 25) + "." + fake(rng, AN, 6) + "." + fake(rng, AN + "_-", 38)
    add("long_discord_token", f"DISCORD_TOKEN={v}", v)
    a, b = fake(rng, AN, 10), fake(rng, AN, 12)
    add("quoted_password_escaped_quote", f'password="{a}\\"{b}"', a + '"' + b, a, b)
    # -- CJK --
    for cls, fmt in (("cjk_shi", "密码是 {}"), ("cjk_wei", "密码为 {}"), ("cjk_space", "密码 {}"),
                     ("cjk_kouling", "口令是 {}"), ("japanese", "パスワードは {}"), ("korean", "비밀번호: {}"),
                     ("cjk_no_space", "服务器的密码是{}，记住")):
        v = password(rng, 13)
        add(cls, fmt.format(v), v)
    # -- command lines --
    v = password(rng, 14)
    add("mysql_p_quoted", f"mysql -h db -u root -p'{v}' app", v)
    v = password(rng, 18)
    add("docker_login", f"docker login -u deploy -p {v} registry.example.com", v)
    v = password(rng, 15)
    add("curl_user", f"curl -u admin:{v} https://jenkins.example.com/api/json", v)
    v = password(rng, 14)
    add("sshpass", f"sshpass -p '{v}' ssh root@10.0.0.5 uptime", v)
    v = fake(rng, AN, 32)
    add("cookie_header", f"Cookie: session={v}; theme=dark", v)
    v = fake(rng, URLSAFE, 40)
    add("set_cookie", f"Set-Cookie: sid={v}; Path=/; HttpOnly", v)
    v = password(rng, 16)
    add("redis_cli", f"redis-cli -h cache -a {v} ping", v)
    # -- key formats --
    for cls, v in (("huggingface", "hf_" + fake(rng, string.ascii_letters, 34)),
                   ("google_oauth_token", "ya29." + fake(rng, URLSAFE, 120)),
                   ("google_oauth_secret", "GOCSPX-" + fake(rng, URLSAFE, 28)),
                   ("groq", "gsk_" + fake(rng, AN, 52)),
                   ("xai", "xai-" + fake(rng, AN, 80)),
                   ("digitalocean", "dop_v1_" + fake(rng, HEX, 64)),
                   ("pypi", "pypi-AgEIcHlwaS5vcmc" + fake(rng, URLSAFE, 70))):
        add(cls, f"{cls} credential: {v}", v)
    v = password(rng, 16)
    add("pgpass_line", f"db.example.com:5432:app:appuser:{v}", v, one_line=False)  # a line of a file
    out[-1].label_ok = True
    v = password(rng, 14)
    add("prose_entropy", f"my github password is {v} please keep it", v)
    # -- base64 --
    v = "ghp_" + fake(rng, AN, 36)
    blob = base64.b64encode(f"machine github.com\nlogin bob\ntoken {v}\npassword {v}\n".encode()).decode()
    add("base64_run_inside", f"echo {blob} | base64 -d > ~/.netrc", v, encoded=[blob[20:60]])
    v = "sk-ant-api03-" + fake(rng, AN + "-_", 60)
    whole = base64.b64encode(v.encode()).decode()
    add("base64_whole", f"ANTHROPIC_KEY_B64={whole}", v, encoded=[whole[4:-4]])
    # -- issue 22 §3: what real users paste --
    first_22 = len(out)
    for cls, fmt in (("mongosh_p", "mongosh mongodb://db:27017/app -u admin -p {} --authenticationDatabase admin"),
                     ("sqlcmd_P", 'sqlcmd -S db,1433 -U sa -P "{}" -Q "SELECT 1"'),
                     ("smbclient_U", "smbclient //files/share -U bob%{} -c ls"),
                     ("htpasswd_b", "htpasswd -bc .htpasswd admin {}"),
                     ("openssl_passout", "openssl pkcs12 -export -in c.pem -inkey k.pem -out c.p12 -passout pass:{}"),
                     ("keytool_storepass", "keytool -list -keystore app.jks -storepass {}"),
                     ("ldapsearch_w", "ldapsearch -x -H ldap://dc1 -D cn=admin,dc=corp -w {} -b dc=corp"),
                     ("zip_P", "zip -P {} backup.zip db.sql"),
                     ("7z_p", "7z a -p{} -mhe=on backup.7z data"),
                     ("sudo_S", "echo {} | sudo -S systemctl restart nginx"),
                     ("net_use", "net use Z: \\\\files\\share {} /user:CORP\\bob"),
                     ("lftp_u", "lftp -u deploy,{} sftp://files.example.com"),
                     ("odbc_pwd", "Driver={{ODBC Driver 18 for SQL Server}};Server=db;Database=app;Uid=sa;Pwd={};"),
                     ("cjk_traditional", "伺服器的密碼是{}"),
                     ("token_shi", "token 是 {}"),
                     ("secret_shi", "secret 是{}"),
                     ("russian_password", "пароль: {}"),
                     ("url_password_hash_slash", "DATABASE_URL=postgres://app:{}@db.example.com:5432/app")):
        v = password(rng, 14) if cls != "url_password_hash_slash" else fake(rng, AN, 6) + "#" + fake(rng, AN, 4) + "/" + \
            fake(rng, AN, 5)
        add(cls, fmt.format(v), v)
    v = fake(rng, B64, 40) + "%2B" + fake(rng, AN, 3) + "%3D"
    add("azure_sas_sig", f"https://acct.blob.core.windows.net/c/f.bin?sv=2022-11-02&sp=r&se=2026-05-01&sig={v}",
        v.replace("%2B", "+").replace("%3D", "="), v)
    v = fake(rng, URLSAFE, 54) + "=="
    add("azure_function_code", f"curl 'https://fn-app.azurewebsites.net/api/Export?code={v}'", v)
    v = fake(rng, HEX, 32)
    add("ocp_apim_key", f"curl -H 'Ocp-Apim-Subscription-Key: {v}' https://api.cognitive.microsoft.com/x", v)
    v = fake(rng, URLSAFE, 68)
    add("discord_webhook", f"https://discord.com/api/webhooks/{fake(rng, string.digits, 19)}/{v}", v)
    v = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    add("feishu_webhook", f"https://open.feishu.cn/open-apis/bot/v2/hook/{v}", v)
    v = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    add("wecom_webhook", f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={v}", v)
    v = fake(rng, HEX, 32)
    add("sentry_dsn", f"SENTRY_DSN=https://{v}@o{fake(rng, string.digits, 6)}.ingest.sentry.io/{fake(rng, string.digits, 7)}", v)
    v = fake(rng, HEX, 40)
    add("x_oauth_basic", f"git clone https://{v}:x-oauth-basic@github.com/me/private.git", v)
    for cls, name, v in (("rails_master_key", "RAILS_MASTER_KEY", fake(rng, HEX, 32)),
                         ("laravel_app_key", "APP_KEY", "base64:" + base64.b64encode(rng.randbytes(32)).decode()),
                         ("fernet_key", "FERNET_KEY", base64.urlsafe_b64encode(rng.randbytes(32)).decode()),
                         ("license_key", "NEW_RELIC_LICENSE_KEY", fake(rng, HEX, 36) + "NRAL"),
                         ("mistral_key", "MISTRAL_KEY", fake(rng, AN, 32))):
        add(cls, f"{name}={v}", v)
    v = "hvs." + fake(rng, URLSAFE, 90)
    add("vault_token", f"vault login {v}", v)
    v = "IQoJb3JpZ2luX2VjE" + fake(rng, B64, 1100) + "=="
    add("aws_session_token", f"aws_session_token = {v}", v[:500], v[500:1000], v[1000:])
    v = base64.b64encode(f"bob:{password(rng, 14)}".encode()).decode()
    add("npmrc_auth", f"//npm.corp.example/:_auth={v}", v)
    v = base64.b64encode(f"deploy:{password(rng, 16)}".encode()).decode()
    add("docker_auth", f'{{"auths": {{"ghcr.io": {{"auth": "{v}"}}}}}}', v)
    body = [fake(rng, B64, 64) for _ in range(4)]
    add("encrypted_pkcs8", "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + "\n".join(body) +
        "\n-----END ENCRYPTED PRIVATE KEY-----", *body)
    body = [fake(rng, B64, 64) for _ in range(3)]
    add("putty_v3", "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key\nPublic-Lines: 1\n"
        f"{body[0]}\nPrivate-Lines: 2\n{body[1]}\n{body[2]}\nPrivate-MAC: {fake(rng, HEX, 64)}", body[1], body[2])
    v = "AGE-SECRET-KEY-1" + fake(rng, string.ascii_uppercase + string.digits, 58)
    add("age_secret_key", f"# created: 2026-04-05\n{v}", v)
    body = [fake(rng, B64, 64) for _ in range(4)]
    add("pem_line_numbers", "     1\t-----BEGIN RSA PRIVATE KEY-----\n" +
        "".join(f"     {i + 2}\t{b}\n" for i, b in enumerate(body)), *body)
    v = "sk-proj-" + fake(rng, AN, 60)
    add("key_concatenated", f'key = "{v[:24]}" + "{v[24:]}"', v[:24], v[24:])
    v = "sk-ant-api03-" + fake(rng, AN, 150)
    line = "$ cat .env | grep ANTHROPIC; ANTHROPIC_API_KEY=" + v
    add("key_terminal_wrap", line[:80] + "\n" + line[80:160] + "\n" + line[160:], line[46:80], line[80:160], line[160:])
    v = "ghp_" + fake(rng, AN, 36)
    add("key_shell_continuation", f"export GH_TOKEN={v[:20]}\\\n{v[20:]}", v[:20], v[20:])
    v = fake(rng, AN, 10) + "/" + fake(rng, AN, 6) + "+" + fake(rng, AN, 8)
    enc = v.replace("/", "%252F").replace("+", "%252B")
    add("double_url_encoded", f"GET /login?next=%2Fapi%3Ftoken%253D{enc}%2526x%253D1 HTTP/1.1", v, enc)
    v = "sk-ant-api03-" + fake(rng, AN, 60)
    add("key_in_signature_field", json.dumps({"type": "webhook", "signature": v}), v)
    v = "AKIA" + fake(rng, string.ascii_uppercase + string.digits, 15) + "7"
    add("aws_id_in_base64_run", f"blob: {fake(rng, B64, 40)}{v}{fake(rng, string.ascii_lowercase, 12)}", v)
    v = "sk-proj-" + fake(rng, AN, 48)  # JSON in a tool result in a log line: \\u escaped three levels deep
    add("u_escaped_three_levels", json.dumps(json.dumps(f'{{"openai_key": "{_u_escape(v)}"}}')), v,
        encoded=[json.dumps(json.dumps(_u_escape(v)))[3:60]])
    for p in out[first_22:]:
        p.issue = 22
    return out


# -- where they go -------------------------------------------------------------

CONTENT_FIELDS = ("user", "assistant", "thinking", "tool_args", "tool_result", "json_in_text", "error",
                  "custom", "custom_message", "compaction", "label_entry")
SHORT_FIELDS = {"label": 255, "display_name": 255, "spawned_by": 255, "cwd": 500, "file_name": 180,
                "model": 128, "tool_name": 128, "custom_type": 128}
SPLIT_FIELDS = ("user", "assistant", "thinking", "tool_result", "custom_message")

BASE_TS = 1775354400000


def _file_safe(text: str) -> bool:
    return "/" not in text and "\n" not in text and "\\" not in text and len(text.encode()) <= 180


@dataclass
class Planted:
    field: str
    plant: Plant


def build(root: Path, seed: int = 12) -> list[Planted]:
    """Write the planted corpus and the look-alike session under ``root``
    (an OpenClaw state dir: agents/main/sessions/...); what went where."""
    rng = random.Random(seed)
    sdir = sessions_dir(root)
    placed: list[Planted] = []
    index: dict[str, dict] = {}
    n_session = 0

    def new_sid() -> str:
        nonlocal n_session
        n_session += 1
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    # -- content fields: one session per field, every class in it --------------
    for fld in CONTENT_FIELDS:
        sid = new_sid()
        c = Chain()
        objs = [header(sid)]
        for p in plants(rng):
            placed.append(Planted(fld, p))
            objs.extend(_content(c, fld, p, rng))
        # a value recognised here, and mentioned bare in a thinking block
        v = fake(rng, AN, 22)
        bare = Plant("bare_value_in_thinking", f"api_key={v}", [v])
        placed.append(Planted(fld, bare))
        objs.extend(_content(c, fld, bare, rng))
        objs.append(c.assistant([{"type": "thinking", "thinking": f"The user pasted {v} earlier; I will not repeat it.",
                                  "thinkingSignature": "c2ln"}, {"type": "text", "text": "ok"}]))
        if fld in SPLIT_FIELDS:
            for cut in (20, 33):
                v = "sk-proj-" + fake(rng, AN, 48)
                placed.append(Planted(fld, Plant("key_split_across_blocks", v, [v])))
                objs.extend(_split(c, fld, "my key is " + v[:cut], v[cut:] + " (two blocks)", rng))
        write(sdir / f"{sid}.jsonl", objs)

    # -- short fields: one session (or index entry) per class ----------------------
    for fld, limit in SHORT_FIELDS.items():
        for p in plants(rng):
            if not p.short(limit, path=fld in ("cwd", "file_name")) or (fld == "file_name" and not _file_safe(p.text)):
                continue
            placed.append(Planted(fld, p))
            sid = new_sid()
            c = Chain()
            objs = [header(sid, cwd=f"/home/bob/{p.text}") if fld == "cwd" else header(sid)]
            objs.append(c.user("hello"))
            if fld == "model":
                objs.append(c.assistant([{"type": "text", "text": "hi"}]))
                objs[-1]["message"]["model"] = p.text
            elif fld == "tool_name":
                objs.append(c.assistant([{"type": "toolCall", "id": "call_1", "name": p.text,
                                          "arguments": {"q": "status"}}]))
                objs.append(c.result("call_1", "done", name=p.text))
            elif fld == "custom_type":
                objs.append(c.entry("custom", customType=p.text, data={"ok": True}))
            else:
                objs.append(c.assistant([{"type": "text", "text": "hi"}]))
            name = f"{sid}-topic-{p.text}.jsonl" if fld == "file_name" else f"{sid}.jsonl"
            write(sdir / name, objs)
            if fld in ("label", "display_name", "spawned_by"):
                key = {"label": "label", "display_name": "displayName", "spawned_by": "spawnedBy"}[fld]
                index[f"agent:main:webchat:direct:{n_session}"] = {
                    "sessionId": sid, "updatedAt": BASE_TS + n_session, "chatType": "direct", "channel": "webchat",
                    key: p.text}

    _look_alike_session(sdir, new_sid(), index)
    (sdir / "sessions.json").write_text(json.dumps(index, ensure_ascii=False, indent=2))
    return placed


def _content(c: Chain, fld: str, p: Plant, rng: random.Random) -> list[dict]:
    text = p.text
    if fld == "user":
        return [c.user("here is my setup\n" + text)]
    if fld == "assistant":
        return [c.assistant([{"type": "text", "text": "I will configure it.\n" + text}])]
    if fld == "thinking":
        return [c.assistant([{"type": "thinking", "thinking": "The user pasted:\n" + text,
                              "thinkingSignature": base64.b64encode(rng.randbytes(90)).decode()},
                             {"type": "text", "text": "Done."}])]
    if fld == "tool_args":
        call = f"call_{c.n}"
        return [c.assistant([{"type": "toolCall", "id": call, "name": "exec",
                              "arguments": {"command": text, "workdir": "/srv/app"}}]),
                c.result(call, "ok")]
    if fld == "tool_result":
        call = f"call_{c.n}"
        return [c.assistant([{"type": "toolCall", "id": call, "name": "exec", "arguments": {"command": "cat notes"}}]),
                c.result(call, "configured:\n" + text, details={"status": "completed", "exitCode": 0})]
    if fld == "json_in_text":
        call = f"call_{c.n}"
        doc = json.dumps({"stdout": text, "exitCode": 0}, ensure_ascii=False)
        return [c.assistant([{"type": "toolCall", "id": call, "name": "exec", "arguments": {"command": "run"}}]),
                c.result(call, doc)]
    if fld == "error":
        return [c.entry("message", message={
            "role": "assistant", "content": [], "stopReason": "error", "provider": "anthropic",
            "model": "claude-test", "errorMessage": "401 Unauthorized for request with " + text,
            "timestamp": BASE_TS + c.n})]
    if fld == "custom":
        return [c.entry("custom", customType="openclaw:deploy-note", data={"note": text, "n": 1})]
    if fld == "custom_message":
        return [c.entry("custom_message", customType="openclaw.runtime-context", display=False,
                        content=[{"type": "text", "text": "context:\n" + text}])]
    if fld == "compaction":
        return [c.entry("compaction", summary="Earlier the user shared:\n" + text, firstKeptEntryId="00000001",
                        tokensBefore=1000)]
    if fld == "label_entry":
        return [c.entry("label", label=text, targetId="00000001")]
    raise ValueError(fld)


def _split(c: Chain, fld: str, first: str, second: str, rng: random.Random) -> list[dict]:
    blocks = [{"type": "text", "text": first}, {"type": "text", "text": second}]
    if fld == "user":
        return [c.entry("message", message={"role": "user", "content": blocks, "timestamp": BASE_TS + c.n})]
    if fld == "assistant":
        return [c.assistant(blocks)]
    if fld == "thinking":
        return [c.assistant([{"type": "thinking", "thinking": first}, {"type": "thinking", "thinking": second},
                             {"type": "text", "text": "ok"}])]
    if fld == "tool_result":
        call = f"call_{c.n}"
        out = [c.assistant([{"type": "toolCall", "id": call, "name": "exec", "arguments": {"command": "env"}}])]
        msg = c.result(call, "x")
        msg["message"]["content"] = blocks
        return out + [msg]
    if fld == "custom_message":
        return [c.entry("custom_message", customType="openclaw.runtime-context", display=False, content=blocks)]
    raise ValueError(fld)


# -- look-alikes -------------------------------------------------------------------

_RNG = random.Random(7)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + _RNG.randbytes(6000)).decode()
SIGNATURE = base64.b64encode(_RNG.randbytes(900)).decode()
LOOK_ALIKES = [
    str(uuid.UUID(int=_RNG.getrandbits(128), version=4)),
    "session 5e55a0a0-0000-4000-8000-00000000000a resumed",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "git show 9fceb02 and 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "docker pull nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31",
    "md5 d41d8cd98f00b204e9800998ecf8427e  empty.txt",
    "Please enter your password to continue; the password must have 12 characters.",
    "The API key is stored in the vault. Authorization header is required. Bearer tokens expire.",
    "Your session token is invalid or expired, please log in again.",
    "token: ",
    "token: null",
    "max_tokens: 4096, input_tokens=1234, totalTokens: 5000, tokenizer: bert-base-uncased",
    "password = getpass.getpass()",
    "token = os.environ['GITHUB_TOKEN']",
    "secret_key = settings.SECRET_KEY",
    "api_key: ${OPENAI_API_KEY}",
    "export OPENAI_API_KEY=$OPENAI_API_KEY",
    "password: <your password here>",
    "api_key = \"YOUR_API_KEY\"",
    "token = \"<token>\"",
    "cat /etc/passwd; ls ~/.ssh/id_ed25519 /home/alice/.aws/credentials C:\\Users\\bob\\secrets.txt",
    "PWD=/home/alice/projects/agentbase",
    "git clone git@github.com:openclaw/openclaw.git && open https://example.com/a?b=1#top",
    "task-1234567890abcdef12345 and scikit-learn and mask-rcnn-resnet50-fpn",
    "mkdir -p /tmp/build && ssh -p 2222 host && tar -xzf a.tgz",
    "请输入密码，然后按回车。密码错误，请重试。",
    "パスワードを入力してください。",
    "비밀번호를 잊으셨나요?",
    "mysql://agentbase:***@127.0.0.1:3306/agentbase",
    "redis://localhost:6379/0 and http://user@host:8080/path",
    "function getPassword() { return this.password; }",
    "if (token == null) throw new Error('no token');",
    "The tokenizer splits 密码 into two characters.",
    "/home/shenwei/work/src/pipeline/credentials_loader.py",
    "openssl rand -base64 32 prints a new random key each time",
    "data:image/png;base64," + PNG[:200],
    "Listening on 0.0.0.0:8080 (pid 4242) at 2026-04-05T01:02:03.456Z",
    # issue 22 §3's shapes, without a credential
    "mongosh -u admin -p; 7z x a.7z -p; unzip -P $ZIPPW a.zip; echo \"$PW\" | sudo -S ls; sqlcmd -P",
    "Server=db;Database=app;Uid=sa;Pwd=; and echo $PWD",
    "the sig= parameter signs a SAS URL; ?code=abc is a short one",
    "SORT_KEY=created_at PRIMARY_KEY=id STORAGE_KEY=app-state-v2 S3_KEY=uploads/2024/a.pdf",
    "cd ~/.claude/projects/-home-u-sk-learn-experiments-2024",
    "http://example.com:8080/foo@bar.com and pip install git+https://github.com:org/pkg.git@v1.2",
    'print("a" + "b") and name = "first" "second"',
    "token 是什么？Введите пароль для входа",
]


def _look_alike_session(sdir: Path, sid: str, index: dict) -> None:
    c = Chain(start=500)
    objs = [header(sid, cwd="/home/alice/projects/agentbase")]
    joined = "\n".join(LOOK_ALIKES)
    objs.append(c.user(joined))
    objs.append(c.entry("message", message={
        "role": "user", "timestamp": BASE_TS,
        "content": [{"type": "text", "text": "a screenshot"}, {"type": "image", "data": PNG, "mimeType": "image/png"}]}))
    objs.append(c.assistant([{"type": "thinking", "thinking": joined, "thinkingSignature": SIGNATURE},
                             {"type": "toolCall", "id": "call_look", "name": "exec", "arguments": {"command": joined}}]))
    objs.append(c.result("call_look", joined))
    objs.append(c.entry("compaction", summary=joined, firstKeptEntryId="00000001", tokensBefore=10))
    objs.append(c.assistant([{"type": "text", "text": "a signed answer", "textSignature": SIGNATURE}]))
    write(sdir / f"{sid}.jsonl", objs)
    index["agent:main:main"] = {"sessionId": sid, "updatedAt": BASE_TS, "label": "Fix the token refresh bug",
                                "displayName": "webchat:alice", "channel": "webchat", "chatType": "direct"}


if __name__ == "__main__":
    where = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/secret-corpus")
    placed = build(where)
    values = {v for p in placed for v in p.plant.values}
    print(f"{where}: {len(placed)} plants, {len(values)} distinct values, "
          f"{len({p.plant.cls for p in placed})} classes, {len({p.field for p in placed})} fields")
