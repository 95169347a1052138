"""Realistic shapes of secrets, for tests that must never find one in the ledger.

Each shape is (name, text holding the secret as a person or a program would write it, the
secret itself). Every secret here is fake and unique, so finding any part of one in stored
text is a leak and nothing else. `leaks` says which parts of a secret survive in a text.
"""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple


class Shape(NamedTuple):
    name: str
    text: str
    secret: str


HF = "hf_FakeLedgerTokenAbCdEfGhIjKlMnOpQr"
OPENAI = "sk-proj-FakeLedgerKey_9f8e7d6c5b4a3210ZyXwVuTsRq"
ANTHROPIC = "sk-ant-api03-FakeLedgerKey-AbCdEfGhIjKlMnOpQrStUvWxYz4k9d2m7x1z-abcdefAA"
GHP = "ghp_FakeLedgerGithubToken4k9d2m7x1zabcdef"
GHO = "gho_FakeLedgerOauthToken4k9d2m7x1zabcdefgh"
GH_PAT = "github_pat_11FAKELEDGER0abcdefghij_KlMnOpQrStUvWxYz4k9d2m7x1zabcdefghijKLMNOP"
AWS_ID = "AKIAFAKELEDGER7EXMPL"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKELEDGERK"
PEM_BODY = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDFakeLedgerKeyLine1\n"
    "q3lX9Wm2Pz8RtYuVbNc4KdGfHjAsQeWr5tYuIoPlKjHgFdSaZxCvBnMqWeRtYuFakeLine2\n"
    "Zk1Lm2Nn3Oo4Pp5Qq6Rr7Ss8Tt9Uu0Vv1Ww2Xx3Yy4Zz5Aa6Bb7Cc8Dd9Ee0Ff1FakeLine3=="
)
GCP_KEY_BODY = "MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQCfakeGcpServiceAcct"
SLACK_BOT = "xoxb-1234567890-0987654321-FakeLedgerSlackBotTok"
SLACK_HOOK = "T0FAKE0LED/B0FAKE0GER/FakeLedgerWebhookSecret0123"
WANDB = "f3a9c1e07b2d4f68a5c3e19d7b0f2a4c6e8d1b3f"
BEARER = "FakeLedgerBearer.Token-4k9d2m7x1z_abcdefXYZ"
COOKIE = "sess_FakeLedgerCookie9f8e7d6c5b4a"
URL_PW = "FakeLedgerUrlPw-91x"
URL_PW_AT = "hunter@2FakeLedger@pw"
MYSQL_PW = "FakeLedgerMysqlPw#42"
SSHPASS_PW = "FakeLedgerSshPw_77"
PG_PW = "FakeLedgerPgPassword3"
DB_PASS = "FakeLedgerDbPass!x9"
ENV_PW = "FakeLedgerSmtpPassword8"
ENV_SECRET = "FakeLedgerJwtSecretValue55"
ENV_TOKEN = "FakeLedgerGenericTokenValue66"
NETRC_PW = "FakeLedgerNetrcPassword4"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJmYWtlLWxlZGdlciIsImlhdCI6MTcwMDAwMDAwMH0"
    ".FakeLedgerSig_4k9d2m7x1zabcdefGHIJKL"
)
JSON_KEY = "abcFakeLedgerJsonApiKey0123"
FLAG_PW = "FakeLedgerFlagPassword1"
DOCKER_TOKEN = "FakeLedgerDockerEnvToken2"
DICT_TOKEN = "FakeLedgerDictReprToken3"
METRIC_KEY = "abcdFakeLedgerMetricApiKey4"
CURL_PW = "FakeLedgerCurlPass5"

# Issue-27 families: vendors' prefixes the first list did not name, tools' password options,
# connection strings, a colour code inside a token, prose, and secrets in code.
TWILIO = "SKfa4e1ed9e7c3b2a1d0f9e8c7b6a5d4e3"
SENDGRID = "SG.FakeLedgerSendGrid01.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
DATABRICKS = "dapif4a3e2d1c0b9a8f7e6d5c4b3a2f1e0d9"
DIGITALOCEAN = "dop_v1_" + "4f1e2d3c" * 8
VAULT = "hvs.CAESIFakeLedgerVaultTokenAbCdEfGhIjKl"
GROQ = "gsk_FakeLedgerGroqKey0123456789abcdefghijklmnopqrstuvwx"
GOOGLE_OAUTH = "ya29.a0FakeLedgerGoogleOauthAccessTokenAbCdEf0123"
SHOPIFY = "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"
REPLICATE = "r8_FakeLedgerReplicateToken0123456789abcdefgh"
PERPLEXITY = "pplx-FakeLedgerPerplexityKey0123456789abcdefghijklmnop"
XAI = "xai-FakeLedgerXaiKey" + "0123456789abcdefghij" * 3
TELEGRAM = "7012345678:AAFakeLedgerTelegramBot0123456789ab"
REDIS_PW = "FakeLedgerRedisPw8c2"
OPENSSL_PW = "FakeLedgerOpensslPw3d"
AWS_CLI_SECRET = "tQ9fakeLedgerAwsCliSecretKey/Xy7Zz01abcd"
CONN_PWD = "FakeLedgerOdbcPwd44"
AZURE_KEY = "FakeLedgerAzureStorage0123456789abcdefABCDEF+/ghij=="
ANSI_HF = "hf_FakeLedgerAnsiSplitTokenQrStUvWxYz01"
PROSE_KEY = "pk9FakeLedgerProseKeyZ8y7X6w5"
CODE_PW = "FakeLedgerCodeArgvPw55"
CODE_DEFAULT = "FakeLedgerEnvDefault66"
QUERY_KEY = "FakeLedgerQueryApiKey77q"
LDAP_PW = "FakeLedgerLdapBindPw88"
KEYTOOL_PW = "FakeLedgerKeystorePw99"
MONGO_PW = "FakeLedgerMongoPw1a2b"

SHAPES: list[Shape] = [
    Shape("hf token, bare", f"loaded credentials {HF} from the cache", HF),
    Shape("hf token, HF_TOKEN=", f"HF_TOKEN={HF} torchrun --nproc_per_node 8 train.py", HF),
    Shape(
        "hf token, HF_TOKEN= not hf-shaped",
        "HF_TOKEN=FakeLedgerPlainHfValue99 python train.py",
        "FakeLedgerPlainHfValue99",
    ),
    Shape("hf token, --hf-token X", f"python train.py --hf-token {HF} --lr 3e-4", HF),
    Shape("hf token, --hf_token=X", f"python train.py --hf_token={HF}", HF),
    Shape(
        "hf token, --hf-token X not hf-shaped",
        "python train.py --hf-token FakeLedgerPlainFlagTok7 --steps 10",
        "FakeLedgerPlainFlagTok7",
    ),
    Shape("openai key", f"export OPENAI_API_KEY={OPENAI}", OPENAI),
    Shape("anthropic key, bare in output", f"client = Anthropic(api_key={ANTHROPIC!r})", ANTHROPIC),
    Shape("github ghp_", f"git push https://{GHP}@github.com/org/repo.git", GHP),
    Shape("github gho_, bare", f"oauth token {GHO} expires in 8h", GHO),
    Shape("github_pat_", f"GH_TOKEN={GH_PAT} gh pr list", GH_PAT),
    Shape("aws access key id, bare", f"using access key {AWS_ID} for s3://bucket", AWS_ID),
    Shape(
        "aws secret key, credentials file",
        f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n",
        AWS_SECRET,
    ),
    Shape(
        "aws secret key, env",
        f'AWS_SECRET_ACCESS_KEY="{AWS_SECRET}" aws s3 cp ckpt s3://b/',
        AWS_SECRET,
    ),
    Shape(
        "gcp service-account json",
        '{"type": "service_account", "project_id": "demo", "private_key_id": "0fake1", '
        '"private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + GCP_KEY_BODY
        + '\\n-----END PRIVATE KEY-----\\n", "client_email": "sa@demo.iam.gserviceaccount.com"}',
        GCP_KEY_BODY,
    ),
    Shape("slack bot token", f"SLACK_BOT={SLACK_BOT} notify.sh", SLACK_BOT),
    Shape(
        "slack webhook",
        f"curl -X POST -d @msg.json https://hooks.slack.com/services/{SLACK_HOOK}",
        SLACK_HOOK,
    ),
    Shape("wandb api key, env", f"WANDB_API_KEY={WANDB} python train.py", WANDB),
    Shape("wandb login KEY", f"wandb login --relogin {WANDB}", WANDB),
    Shape(
        "bearer in Authorization header",
        f'curl -H "Authorization: Bearer {BEARER}" https://api.example.com/v1/runs',
        BEARER,
    ),
    Shape(
        "Cookie header",
        f"> GET /api HTTP/1.1\n> Cookie: session={COOKIE}; theme=dark\n> Accept: */*",
        COOKIE,
    ),
    Shape("url password", f"git clone https://ci-bot:{URL_PW}@git.example.com/repo.git", URL_PW),
    Shape(
        "url password holding @",
        f"DATABASE_URL=postgresql://admin:{URL_PW_AT}@db.internal:5432/ledger",
        URL_PW_AT,
    ),
    Shape("mysql -pSECRET", f"mysql -h db -u root -p{MYSQL_PW} ledger < dump.sql", MYSQL_PW),
    Shape("mysql -p SECRET", f"mysqldump -u root -p {MYSQL_PW} --all-databases", MYSQL_PW),
    Shape("sshpass -p X", f"sshpass -p '{SSHPASS_PW}' ssh root@gpu-host nvidia-smi", SSHPASS_PW),
    Shape("PGPASSWORD=", f"PGPASSWORD={PG_PW} psql -h db -U postgres -c 'select 1'", PG_PW),
    Shape("DB_PASS=", f"DB_PASS={DB_PASS} ./migrate.sh", DB_PASS),
    Shape("*_PASSWORD=", f"export SMTP_PASSWORD={ENV_PW}", ENV_PW),
    Shape("*_SECRET=", f"JWT_SECRET={ENV_SECRET} gunicorn app:app", ENV_SECRET),
    Shape("*_TOKEN=", f"env CI_DEPLOY_TOKEN={ENV_TOKEN} ./deploy.sh", ENV_TOKEN),
    Shape(
        "netrc, one line",
        f"machine api.wandb.ai login user password {NETRC_PW}",
        NETRC_PW,
    ),
    Shape(
        "netrc, one token a line",
        f"machine huggingface.co\n  login bob\n  password {NETRC_PW}\n",
        NETRC_PW,
    ),
    Shape(
        "PEM private key block",
        "key file:\n-----BEGIN RSA PRIVATE KEY-----\n"
        + PEM_BODY
        + "\n-----END RSA PRIVATE KEY-----\n",
        PEM_BODY,
    ),
    Shape(
        "PEM block without its END (output cut)",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "\n",
        PEM_BODY,
    ),
    Shape(
        "PEM block without its BEGIN (output cut)",
        PEM_BODY + "\n-----END PRIVATE KEY-----\nok\n",
        PEM_BODY,
    ),
    Shape("bare JWT", f"token refreshed: {JWT}", JWT),
    Shape("JSON api_key", f'{{"model": "gpt", "api_key": "{JSON_KEY}"}}', JSON_KEY),
    Shape(
        "JSON api_key split across argv words",
        shlex.join(["tool", "--config", '{"api_key":', f'"{JSON_KEY}"}}']),
        JSON_KEY,
    ),
    Shape(
        "JSON api_key escaped in a string",
        f'config = "{{\\"api_key\\": \\"{JSON_KEY}\\"}}"',
        JSON_KEY,
    ),
    Shape("--password X", f"tool --user admin --password {FLAG_PW} sync", FLAG_PW),
    Shape("--password=X", f"tool --password={FLAG_PW}", FLAG_PW),
    Shape("docker -e TOKEN=", f"docker run --rm -e TOKEN={DOCKER_TOKEN} img:latest", DOCKER_TOKEN),
    Shape(
        "docker -e with quotes",
        f'docker run -e "HF_TOKEN={DOCKER_TOKEN}" --gpus all img',
        DOCKER_TOKEN,
    ),
    Shape(
        "python dict repr",
        f"config: {{'model': 'llama', 'hf_token': '{DICT_TOKEN}', 'lr': 0.0003}}",
        DICT_TOKEN,
    ),
    Shape(
        "secret key in a metric-like line",
        f"step=5 loss=1.2 lr=3e-4 api_key={METRIC_KEY} tokens/s=14203",
        METRIC_KEY,
    ),
    Shape("curl -u user:pass", f"curl -u admin:{CURL_PW} https://nexus.example.com/x", CURL_PW),
    Shape(
        "yaml config dump",
        "wandb:\n  project: ledger\n  api_key: FakeLedgerYamlKey77\n",
        "FakeLedgerYamlKey77",
    ),
    Shape("twilio api key", f"twilio api:core:calls:list --api-key {TWILIO}", TWILIO),
    Shape("sendgrid key, bare", f"mail client configured with {SENDGRID}", SENDGRID),
    Shape(
        "databricks token",
        f"databricks configure --host https://dbc.example --tk {DATABRICKS}",
        DATABRICKS,
    ),
    Shape("digitalocean token", f"doctl auth init -t {DIGITALOCEAN}", DIGITALOCEAN),
    Shape("vault token, bare", f"Success! token {VAULT} is valid for 768h", VAULT),
    Shape("groq key", f"client = Groq({GROQ!r})", GROQ),
    Shape("google oauth access token", f"got access {GOOGLE_OAUTH} expires_in 3599", GOOGLE_OAUTH),
    Shape("shopify token", f"SHOPIFY={SHOPIFY} npm run sync", SHOPIFY),
    Shape("replicate token", f"replicate run model --using {REPLICATE}", REPLICATE),
    Shape("perplexity key", f"pplx client init {PERPLEXITY}", PERPLEXITY),
    Shape("xai key", f"grok: using {XAI}", XAI),
    Shape(
        "telegram bot token", f"curl https://api.telegram.org/bot{TELEGRAM}/sendMessage", TELEGRAM
    ),
    Shape("redis-cli -a X", f"redis-cli -h cache -p 6379 -a {REDIS_PW} ping", REDIS_PW),
    Shape(
        "openssl pass:X",
        f"openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{OPENSSL_PW}",
        OPENSSL_PW,
    ),
    Shape(
        "aws configure set KEY X",
        f"aws configure set aws_secret_access_key {AWS_CLI_SECRET} --profile train",
        AWS_CLI_SECRET,
    ),
    Shape(
        "odbc connection string Pwd=X;",
        f"Driver={{ODBC Driver 18}};Server=db;Database=runs;Uid=sa;Pwd={CONN_PWD};",
        CONN_PWD,
    ),
    Shape(
        "azure storage AccountKey=X;",
        f"DefaultEndpointsProtocol=https;AccountName=ckpts;AccountKey={AZURE_KEY};"
        "EndpointSuffix=core.windows.net",
        AZURE_KEY,
    ),
    Shape(
        "hf token split by an ANSI colour code",
        f"token: {ANSI_HF[:12]}\x1b[1;32m{ANSI_HF[12:]}\x1b[0m ok",
        ANSI_HF,
    ),
    Shape("prose: api key: X", f"Your new api key: {PROSE_KEY} (keep it safe)", PROSE_KEY),
    Shape(
        "code: argv list after --password",
        f'cmd = ["psql", "--password", "{CODE_PW}", "-h", "db"]',
        CODE_PW,
    ),
    Shape(
        "code: os.environ.get default",
        f'key = os.environ.get("OPENAI_API_KEY", "{CODE_DEFAULT}")',
        CODE_DEFAULT,
    ),
    Shape(
        "url ?api_key=X",
        f'resp = get("https://api.example.com/v1/runs?api_key={QUERY_KEY}&limit=5")',
        QUERY_KEY,
    ),
    Shape("ldapsearch -w X", f"ldapsearch -x -D cn=admin -w {LDAP_PW} -b dc=ex", LDAP_PW),
    Shape(
        "keytool -storepass X",
        f"keytool -list -keystore ks.jks -storepass {KEYTOOL_PW}",
        KEYTOOL_PW,
    ),
    Shape("mongosh -p X", f"mongosh --host db -u root -p {MONGO_PW} --eval 'db.stats()'", MONGO_PW),
]

_FRAGMENT = 10


def _windows(secret: str) -> list[str]:
    return [
        piece[i : i + _FRAGMENT]
        for piece in re.split(r"\s+|\\n", secret)
        for i in range(len(piece) - _FRAGMENT + 1)
    ]


# Runs that several secrets share ("FakeLedger") say nothing about which one leaked.
_SECRETS = sorted({shape.secret for shape in SHAPES})
_SHARED = {w for s in _SECRETS for w in _windows(s) if sum(w in t for t in _SECRETS) > 1}


def leaks(secret: str, text: str) -> list[str]:
    """Parts of `secret` found in `text`: each short line of it, and the 10-character runs of
    its longer lines (those no other secret of the catalogue shares)."""
    found = []
    for piece in re.split(r"\s+|\\n", secret):
        if len(piece) < _FRAGMENT:
            if len(piece) >= 6 and piece in text:
                found.append(piece)
            continue
        for i in range(len(piece) - _FRAGMENT + 1):
            window = piece[i : i + _FRAGMENT]
            if window not in _SHARED and window in text:
                found.append(window)
                break
    return found
