"""Issue 22 §3: the credential shapes real users paste, one at a time on the Detector (each
found, and its ordinary look-alikes left alone), and the places a value leaked from though it
was caught elsewhere: a preview or title cut through a credential, agent-server file paths and
audit actors, Claude Code's project folder name. Every value is made up here.
"""

from __future__ import annotations

import base64
import json
import random
import sqlite3
import string
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import claude_code_fixtures as F  # noqa: E402
from transcripts import Chain, do_import, header, sessions_dir, write  # noqa: E402

from importer import parser as P  # noqa: E402
from importer import redact as R  # noqa: E402
from importer.snapshot import export_snapshot  # noqa: E402
from importer.store import open_store  # noqa: E402

AN = string.ascii_letters + string.digits
RNG = random.Random(22)


def fake(alphabet: str = AN, n: int = 24) -> str:
    """n random characters of the alphabet, with a digit, and a letter where it has letters (of
    both cases where it has both): never a word."""
    while True:
        v = "".join(RNG.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in v) and all(not (set(alphabet) & set(group)) or set(v) & set(group)
                                                 for group in (string.ascii_lowercase, string.ascii_uppercase)):
            return v


def found(text: str) -> set[str]:
    return {v for v, _k in R.detector().scan(text)}


def gone(text: str, *secrets: str) -> bool:
    """Every secret is gone from the text once what the detector found there is replaced."""
    new, _counts = R.SecretSet(R.detector().scan(text)).replace(text)
    return not any(s in new for s in secrets)


PW = fake(AN, 12) + "!7"

SHAPES = {
    "mongosh": f"mongosh mongodb://db/app -u admin -p {PW} --quiet",
    "sqlcmd": f'sqlcmd -S db -U sa -P "{PW}" -Q "SELECT 1"',
    "smbclient": f"smbclient //srv/share -U bob%{PW}",
    "htpasswd": f"htpasswd -nbB admin {PW}",
    "openssl": f"openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{PW}",
    "keytool": f"keytool -list -keystore a.jks -storepass {PW}",
    "ldapsearch": f"ldapsearch -x -D cn=admin,dc=ex -w {PW} -b dc=ex",
    "zip": f"zip -P {PW} out.zip a.txt",
    "7z": f"7z a -p{PW} out.7z dir",
    "sudo": f"echo {PW} | sudo -S whoami",
    "net_use": f"net use Z: \\\\srv\\share {PW} /user:CORP\\bob",
    "lftp": f"lftp -u bob,{PW} sftp://files",
    "odbc": f"Server=db;Database=app;Uid=sa;Pwd={PW};",
    "url_hash_slash": f"postgres://app:{PW[:5]}#{PW[5:9]}/{PW[9:]}@db.example.com/app",
    "traditional": f"密碼是{PW}",
    "token_shi": f"token 是 {PW}",
    "russian": f"пароль: {PW}",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_password_shape_is_found(name):
    text = SHAPES[name]
    value = PW if name != "url_hash_slash" else f"{PW[:5]}#{PW[5:9]}/{PW[9:]}"
    assert value in found(text), name
    assert gone(text, value), name


def test_provider_formats():
    sig = fake(AN, 40) + "%2B" + fake(AN, 3) + "%3D"
    code = fake(AN + "-_", 54) + "=="
    hexkey = fake("0123456789abcdef", 32)
    hook = fake(AN + "-_", 68)
    uid = "1b2c3d4e-5f60-4718-9a0b-c1d2e3f4a5b6"
    vault = "hvs." + fake(AN + "-_", 90)
    age = "AGE-SECRET-KEY-1" + fake(string.ascii_uppercase + string.digits, 58)
    sts = "IQoJb3JpZ2luX2VjE" + fake(AN + "+/", 1200)
    token40 = fake("0123456789abcdef", 40)
    cases = {
        f"https://a.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig={sig}": sig,
        f"https://fn.azurewebsites.net/api/Go?code={code}": code,
        f"curl -H 'Ocp-Apim-Subscription-Key: {hexkey}' https://x": hexkey,
        f"https://discord.com/api/webhooks/1234567890123456789/{hook}": hook,
        f"https://open.feishu.cn/open-apis/bot/v2/hook/{uid}": uid,
        f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={uid}": uid,
        f"dsn https://{hexkey}@o12345.ingest.sentry.io/678901": hexkey,
        f"git clone https://{token40}:x-oauth-basic@github.com/me/r.git": token40,
        f"vault login {vault}": vault,
        age: age,
        f"aws_session_token = {sts}": sts,
    }
    for text, value in cases.items():
        assert value in found(text), text[:30]
        assert gone(text, value), text[:30]
    assert len(sts) > 1024  # taken whole, not its first 512 characters


def test_env_keys_of_any_name():
    for name, v in (("RAILS_MASTER_KEY", fake("0123456789abcdef", 32)),
                    ("APP_KEY", "base64:" + base64.b64encode(RNG.randbytes(32)).decode()),
                    ("FERNET_KEY", base64.urlsafe_b64encode(RNG.randbytes(32)).decode()),
                    ("NEW_RELIC_LICENSE_KEY", fake("0123456789abcdef", 40)), ("MISTRAL_KEY", fake(AN, 32))):
        assert v in found(f"{name}={v}"), name
        assert v in {x for x, _k in R.detector().scan_json(json.dumps({name: v}))}, name
    # names and values that are not keys
    for text in ("SORT_KEY=created_at", "PRIMARY_KEY=id", "STORAGE_KEY=app-state-v2", "S3_KEY=uploads/2024/a.pdf",
                 "REDIS_KEY=user:1234:session", "PUBLIC_KEY=" + fake(AN, 40), "GPG_KEY=" + fake("0123456789ABCDEF", 16)):
        assert not found(text), text


def test_base64_user_password():
    auth = base64.b64encode(f"bob:{PW}".encode()).decode()
    assert auth in found(f"//registry.example/:_auth={auth}")
    assert auth in {v for v, _k in R.detector().scan_json(json.dumps({"auths": {"ghcr.io": {"auth": auth}}}))}
    plain = base64.b64encode(b"no colon here").decode()
    assert not found(f'"auth": "{plain}"')


def test_private_key_blocks():
    body = [fake(AN + "+/", 64) for _ in range(4)]
    for text in ("-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END ENCRYPTED PRIVATE KEY-----",
                 "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 1\n" + body[0]
                 + "\nPrivate-Lines: 3\n" + "\n".join(body[1:]) + "\nPrivate-MAC: " + fake("0123456789abcdef", 64),
                 "     1\t-----BEGIN RSA PRIVATE KEY-----\n" + "".join(f"     {i + 2}\t{b}\n" for i, b in enumerate(body)),
                 "     1→-----BEGIN RSA PRIVATE KEY-----\n" + "".join(f"     {i + 2}→{b}\n" for i, b in enumerate(body))):
        assert gone(text, *body[1:]), text[:20]


def test_keys_split_by_a_concatenation_a_wrap_or_a_continuation():
    key = "sk-proj-" + fake(AN, 60)
    gh = "ghp_" + fake(AN, 36)
    line = "$ grep ANTHROPIC .env; ANTHROPIC_API_KEY=sk-ant-api03-" + fake(AN, 150)
    for text, pieces in ((f'k = "{key[:24]}" + "{key[24:]}"', (key[:24], key[24:])),
                         (f'k = ("{key[:30]}"\n     "{key[30:]}")', (key[:30], key[30:])),
                         (f"export GH_TOKEN={gh[:20]}\\\n{gh[20:]}", (gh[:20], gh[20:])),
                         (line[:80] + "\n" + line[80:160] + "\n" + line[160:], (line[80:160], line[160:]))):
        assert gone(text, *pieces), text[:20]
    # ordinary joins and lines are left alone
    assert not found('print("a" + "b")\nname = "first" "second"')
    assert not found("x" * 70 + " sk-" + fake("0123456789abcdef", 32)[:0] + "\nnext line")


def test_double_url_encoded_and_a_key_inside_base64():
    v = fake(AN, 10) + "/" + fake(AN, 6) + "+" + fake(AN, 8)
    enc = v.replace("/", "%252F").replace("+", "%252B")
    assert gone(f"GET /login?next=%2Fapi%3Ftoken%253D{enc}%2526x%253D1", enc)
    key_id = "AKIA" + fake(string.ascii_uppercase + string.digits, 15) + "7"
    assert key_id in found("blob " + fake(AN + "+/", 40) + key_id + "abcdefgh")
    assert not found("SOUTHEASTASIAPACIFICREGIONS and " + "QWERTYASIAUIOPASDFGHJKLZX")


def test_a_key_in_a_signature_field_but_not_a_signature():
    key = "sk-ant-api03-" + fake(AN, 60)
    assert key in {v for v, _k in R.detector().scan_json(json.dumps({"type": "webhook", "signature": key}))}
    for _ in range(200):  # a thinking block's signature: base64 of random bytes
        sig = base64.b64encode(RNG.randbytes(700)).decode()
        assert R.detector().scan_json(json.dumps([{"type": "thinking", "thinking": "ok", "signature": sig}])) == []


def test_ordinary_text_is_left_alone():
    for text in ("mkdir -p build && ssh -p 2222 host", "mongosh -u admin -p", "mongosh -p --port 27017",
                 "7z x a.7z -p", "unzip -P $ZIPPW a.zip", "sqlcmd -P", "the sig= field holds the signature",
                 "see ?sig=short", "Server=db;Uid=sa;Pwd=;", "echo $PWD", "PWD=/home/u/app",
                 "http://example.com:8080/foo@bar.com", "pip install git+https://github.com:org/pkg.git@v1.2",
                 "-home-u-sk-learn-experiments-2024", "-home-u-20240101-my-very-long-project-name-and-more",
                 "Введите пароль для входа", "token 是什么", "echo \"$PW\" | sudo -S ls", "openssl rsa -passin env:PW"):
        assert not found(text), text


def test_claude_code_folder_names_are_read_mangled():
    gh = "ghp_" + fake(AN, 36)
    ant = "sk-ant-api03-" + fake(AN + "_", 60)
    for key in (gh, ant):
        cwd = f"/home/u/proj?token={key}"
        folder = "".join(c if c.isalnum() else "-" for c in cwd)
        path = f"projects/{folder}/{F.SID}.jsonl"
        new, _c = R.SecretSet(R.detector().scan(path, path=True)).replace(path)
        mangled = "".join(c if c.isalnum() else "-" for c in key)
        assert mangled[8:28] not in new, key[:4]


# -- the places ------------------------------------------------------------------------------

def export(db: Path, out: Path) -> bytes:
    store = open_store(f"sqlite:///{db}")
    try:
        export_snapshot(store, out, timezone="UTC")
    finally:
        store.close()
    data = out.read_bytes()
    wal = out.with_name(out.name + "-wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def test_the_cut_never_ends_inside_a_credential():
    head = "x" * 500 + " "
    for tail in ("AKIA" + fake(string.ascii_uppercase + string.digits, 15) + "7", "password=" + PW + "and-more",
                 "1234567890:AA" + fake(AN, 33)):
        text = head + tail + " and the rest"
        cut = P.cut_text(text)
        assert text.startswith(cut) and len(cut) <= 512
        assert cut.endswith((" ", "=")), tail[:4]
    assert P.cut_text("y" * 600) == "y" * 512


def _plant_cut_credentials(tmp_path: Path, sid: str, before_key: int, before_token: int) -> tuple[str, str]:
    """An OpenClaw error message (under ``tmp_path/oc``) whose 512-character preview goes through an
    AWS key id after ``before_key`` characters, and a Claude Code session (``tmp_path/cc``) whose
    title goes through a Telegram token after ``before_token``; returns (key id, token)."""
    key_id = "AKIA" + fake(string.ascii_uppercase + string.digits, 15) + "7"
    tg = "1234567890:AA" + fake(AN, 33)
    c = Chain()
    write(sessions_dir(tmp_path / "oc") / "a.jsonl", [
        header(sid), c.user("hi"),
        c.entry("message", message={"role": "assistant", "content": [], "stopReason": "error",
                                    "provider": "anthropic", "model": "m", "timestamp": 1775354400000,
                                    "errorMessage": "e" * before_key + " " + key_id + " rejected"})])
    conv = F.Conv(F.SID)
    conv.user("hello")
    conv.floating("ai-title", aiTitle="t" * before_token + " token " + tg + " end", sessionId=F.SID)
    F.write(F.config_dir(tmp_path / "cc") / "projects" / F.PROJECT / f"{F.SID}.jsonl", conv.lines)
    return key_id, tg


def test_previews_and_titles_cut_through_a_credential_keep_no_head(tmp_path):
    """An error message's preview (OpenClaw: no content to cut it again from) and a Claude Code
    session title, each cut at 512 characters through a credential."""
    key_id, tg = _plant_cut_credentials(tmp_path, "5e55a0a0-0000-4000-8000-0000000000c1", 495, 490)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "oc", tmp_path / "cc")
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE text_preview LIKE 'eeee%'").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM sessions WHERE title LIKE 'tttt%'").fetchone()[0] == 1
    finally:
        conn.close()
    data = export(db, tmp_path / "snap.db")
    assert key_id[:10].encode() not in data and key_id[-10:].encode() not in data
    assert tg[:10].encode() not in data and tg[14:24].encode() not in data


def test_agent_server_file_paths_and_audit_actors_are_redacted(tmp_path):
    import agent_server_fixture as AS

    built = AS.build_agent_db(tmp_path / "server", seed=3)
    key = "sk-ant-api03-" + fake(AN, 60)
    gh = "ghp_" + fake(AN, 36)
    conn = sqlite3.connect(built.db_path)
    try:
        fid = conn.execute("SELECT id FROM files LIMIT 1").fetchone()[0]
        conn.execute("UPDATE files SET rel_path = ? WHERE id = ?", (f"uploads/{key}.txt", fid))
        aid = conn.execute("SELECT id FROM audit_logs LIMIT 1").fetchone()[0]
        conn.execute("UPDATE audit_logs SET actor = ? WHERE id = ?", (f"token:{gh}", aid))
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    db = tmp_path / "a.db"
    do_import(db, built.root, server="srv")
    data = export(db, tmp_path / "snap.db")
    assert key[12:32].encode() not in data
    assert gh[4:24].encode() not in data


def test_a_claude_code_cwd_key_is_gone_from_the_mangled_folder_name(tmp_path):
    gh = "ghp_" + fake(AN, 36)
    ant = "sk-ant-api03-" + fake(AN + "_", 70)
    for i, key in enumerate((gh, ant)):
        cwd = f"/home/u/proj-{i}?token={key}"
        folder = "".join(c if c.isalnum() else "-" for c in cwd)
        sid = f"c1a0de00-0000-4000-8000-00000000001{i}"
        conv = F.Conv(sid, tag=i + 1, cwd=cwd)
        conv.user("deploy it")
        F.write(F.config_dir(tmp_path / "cc") / "projects" / folder / f"{sid}.jsonl", conv.lines)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "cc")
    data = export(db, tmp_path / "snap.db")
    conn = sqlite3.connect(tmp_path / "snap.db")
    try:
        paths = [r[0] for r in conn.execute("SELECT file_path FROM sessions UNION ALL SELECT file_path FROM parsed_files")]
    finally:
        conn.close()
    assert len(paths) >= 4
    for key in (gh, ant):
        mangled = "".join(c if c.isalnum() else "-" for c in key)
        assert not any(mangled[8:28] in p or key[8:28] in p for p in paths), key[:4]
        assert mangled[8:28].encode() not in data and key[8:28].encode() not in data


BEFORE_CUT_RULE = "4ed83e1"  # main before previews and titles were cut before a credential


def _code_before(tmp_path: Path) -> Path:
    import os
    import subprocess

    got = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "archive", BEFORE_CUT_RULE],
                         capture_output=True)
    if got.returncode != 0:  # (a shallow clone has no history to compare with)
        message = f"no commit {BEFORE_CUT_RULE} in this clone's history"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    before = tmp_path / "before"
    before.mkdir()
    subprocess.run(["tar", "-x", "-C", str(before)], input=got.stdout, check=True)
    return before


def test_an_archive_cut_through_a_credential_by_an_earlier_agentbase_keeps_no_head(tmp_path):
    """An archive imported before the cut rule holds previews and titles cut inside a credential
    (its head at their end); exported by this code, no head reaches the snapshot."""
    import os
    import subprocess

    before = _code_before(tmp_path)
    key_id, tg = _plant_cut_credentials(tmp_path, "5e55a0a0-0000-4000-8000-0000000000c2", 500, 495)
    db = tmp_path / "a.db"
    env = dict(os.environ, PYTHONPATH=str(before), AGENTBASE_HOME=str(tmp_path / "home"),
               AGENTBASE_CONFIG=str(tmp_path / "none.yml"))
    for tree in ("oc", "cc"):
        subprocess.run([sys.executable, "-m", "importer", "import", str(tmp_path / tree), "--db", f"sqlite:///{db}",
                        "-q"], cwd=before, env=env, check=True, capture_output=True)
    conn = sqlite3.connect(db)
    try:  # the earlier cut: the credentials' heads at the end of the preview and of the title
        preview = conn.execute("SELECT text_preview FROM messages WHERE text_preview LIKE 'eeee%'").fetchone()[0]
        title = conn.execute("SELECT title FROM sessions WHERE title LIKE 'tttt%'").fetchone()[0]
    finally:
        conn.close()
    assert len(preview) == 512 and key_id.startswith(preview.rsplit(" ", 1)[1])
    assert len(title) == 512 and tg.startswith(title.rsplit(" ", 1)[1])
    data = export(db, tmp_path / "snap.db")
    assert key_id[:10].encode() not in data and tg[:10].encode() not in data
    snap = sqlite3.connect(tmp_path / "snap.db")
    try:
        got = snap.execute("SELECT text_preview FROM messages WHERE text_preview LIKE 'eeee%'").fetchone()[0]
        assert got.startswith("e" * 500 + " [REDACTED:") and got.endswith("]"), got[495:]  # the rest kept
    finally:
        snap.close()
