"""Which names say their value is a secret (`HF_TOKEN`, `--password`, `apiKey`), and which
only look as if they did (`pad_token`, `sort_key`, `max_tokens`)."""

from __future__ import annotations

import re
from functools import lru_cache


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# ---------------------------------------------------------------------------------------------
# Which names are secret.
#
# A name is split into lower-case words (`WANDB_API_KEY`, `apiKey`, `--hf-token`, `db.pass`).
# Strong nouns are secret wherever they stand, unless a word after them says the value is
# about the secret rather than the secret itself (`password_min_length`, `secret_name`).
# Weak nouns are secret only as the last word, and not after a qualifier that makes them
# ordinary (`pad_token`, `sort_key`, `forward_pass`); plurals never are (`max_tokens`).
_STRONG = _set(
    "password passwd passphrase secret credential credentials cookie authorization "
    "apikey dsn webhook jwt bearer sessionid secrets passwords"
)
_WEAK = _set("token key pass pwd auth sig signature")
_ABOUT = _set(
    "length len min max count num size file path dir name names hash hashed type kind env "
    "var prefix suffix policy rotation expiry expires expiration ttl age required enabled "
    "set present field prompt reset manager arn ref id mode strength changed updated label "
    "hint format stdin rate"
)
_ORDINARY_QUALIFIERS: dict[str, frozenset[str]] = {
    "token": _set(
        "pad eos bos unk mask sep cls start end stop special image img vision audio video "
        "eot eom fim think begin next prev last first new input output target padding sample "
        "predicted generated vocab bpe text word sub subword split boundary placeholder tool "
        "system user assistant turn per max min num total avg mean decoder encoder"
    ),
    "key": _set(
        "sort primary foreign cache dict group partition shard sharding seq sequence lookup "
        "index hash row column col map metric task batch input output attn attention query kv "
        "join unique composite random rng prng seed split data label feature cluster routing "
        "config state param module layer name dataset sample image text audio video tensor "
        "checkpoint ckpt prefix object log event entry table field record first last next prev "
        "lock idempotency dedup match filter by dim hot monkey public"
    ),
    "pass": _set(
        "forward fwd backward bwd first second third final multi single one two by compile "
        "graph skip no num each per train eval val test bypass"
    ),
    "pwd": frozenset(["old"]),
    "auth": _set("no use require required enable enabled disable disabled skip"),
    "sig": frozenset(),
    "signature": _set("function method type call fn func input output"),
}
# Words after a secret noun that keep it secret (`HF_TOKEN_PROD`, `api_key_2`, `token_value`).
_KEEPS_SECRET = _set(
    "prod production dev staging stage test ci ro rw read write readonly old new backup "
    "primary secondary main default local remote value val raw plain b64 base64 hex enc "
    "encrypted"
)
# Single words that end in a noun (`PGPASSWORD`, `hftoken`, `accesskey`).
_ENDS_SECRET = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "credentials",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "authkey",
    "signingkey",
    "masterkey",
    "sessionid",
    "cookie",
)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@lru_cache(maxsize=4096)
def is_secret_key(name: str) -> bool:
    """Whether a key (a metric or config name, an option, a variable) names a secret."""
    words = [w.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for w in _WORDS.findall(part)]
    while words and (words[-1].isdigit() or words[-1] in _KEEPS_SECRET):
        words.pop()
    if not words:
        return False
    last, before = words[-1], words[-2] if len(words) > 1 else ""
    if last == "id" and before == "key":  # AWS_ACCESS_KEY_ID, private_key_id
        words.pop()
        last, before = "key", words[-2] if len(words) > 1 else ""
    if any(w in _STRONG for w in words):
        for i, word in enumerate(words):
            if word in _STRONG and (i + 1 == len(words) or words[i + 1] not in _ABOUT):
                return True
    if last in _WEAK:
        if last in ("key", "pwd", "pass") and not before:
            # a bare `key` is a dict key, PWD the working directory, `pass=3` a test count
            return False
        return before not in _ORDINARY_QUALIFIERS[last]
    return len(words) == 1 and (
        any(last.endswith(n) for n in _ENDS_SECRET) or "password" in last or "passwd" in last
    )
