"""Shapes that say "secret" on their own: vendors' token prefixes, JWTs, webhook URLs,
authorization and cookie headers, URL passwords, netrc entries."""

from __future__ import annotations

import re
from collections.abc import Iterator

# ---------------------------------------------------------------------------------------------
# Shapes that say "secret" on their own.

_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|sk-[A-Za-z0-9_\-]{20,}"  # OpenAI (sk-proj-…), Anthropic (sk-ant-…)
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_\-]{20,}"
    r"|xox[abposre]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"  # AWS access key id
    r"|AIza[A-Za-z0-9_\-]{35}"  # Google API key
    r"|npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_\-]{40,}"
    r")"
)
_JWT = re.compile(
    r"(?<![A-Za-z0-9_])(?<![^\n]-)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*"
)
_WEBHOOK = re.compile(
    r"(?P<head>hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"|discord(?:app)?\.com/api/webhooks/)(?P<value>[A-Za-z0-9_/\-]+)"
)
_AUTH_HEADER = re.compile(
    r"(?<!\w)(?P<name>(?:proxy-)?authorization)(?P<sep>[ \t]*[:=][ \t]*)"
    r"(?P<value>(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?[^\s'\"]{1,8192})",
    re.IGNORECASE,
)
_BEARER = re.compile(
    r"(?<!\w)(?P<name>bearer)(?P<sep>[ \t]+)(?P<value>[\w.~+/=\-]{12,8192})", re.IGNORECASE
)
_COOKIE_HEADER = re.compile(
    r"(?<!\w)(?P<name>(?:set-)?cookie)(?P<sep>[ \t]*:[ \t]*)(?P<value>[^\r\n'\"]{1,8192})",
    re.IGNORECASE,
)
# (A `+` or `-` that starts a line is a diff's, not part of a word or a scheme.)
# The password runs to the last @ of the authority, so that a password holding one is masked
# whole: postgresql://admin:p@ss@db/x.
_URL_PASSWORD = re.compile(
    r"(?P<name>(?<![\w.])(?<![^\n][+\-])[a-z][a-z0-9+.\-]{0,30}://[^\s:/'\"]{0,256}:)(?P<sep>)"
    r"(?P<value>[^\s/'\"]{1,256})(?=@)",
    re.IGNORECASE,
)
# netrc: `machine h login u password X`, on one line or several (a diff's lines start with +/-).
_NETRC = re.compile(
    r"(?P<name>(?<!\w)(?:default\s+)?(?:(?:machine|login|account)\s+\S{1,512}\s+(?:[+\-]\s*)?){1,3}"
    r"(?:password|passwd))(?P<sep>\s+)(?P<value>\S{1,4096})"
)
# Commands whose options carry a password: the command, then its words up to the shell's next
# separator or the next such command (`sshpass -p X ssh h mysql -pY`); within them, the option.

# More vendors' prefixes. They are tried only on words long enough to be a token, so that the
# cost stays that of one scan for long words, however long this list grows.
# Every token below holds a run of 16 letters and digits; ordinary output seldom does.
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{16,}")
_TOKEN_CHARS = frozenset("_-.:/+=")
_TOKEN_STARTS = re.compile(r"(?:^|[_\-.:/+=]|(?<=bot)(?=\d))(?=[A-Za-z0-9])")
_VENDOR_SHAPES = re.compile(
    r"(?:"
    r"(?:SK|AC)[0-9a-fA-F]{32}"  # Twilio API key, account SID
    r"|SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,64}"  # SendGrid
    r"|dapi[0-9a-f]{32}(?:-\d+)?"  # Databricks
    r"|do[opr]_v1_[0-9a-f]{64}"  # DigitalOcean
    r"|hv[sbr]\.[A-Za-z0-9_\-]{24,}"  # HashiCorp Vault
    r"|gsk_[A-Za-z0-9]{40,}"  # Groq
    r"|ya29\.[0-9A-Za-z_\-]{20,}|GOCSPX-[A-Za-z0-9_\-]{20,}|1//0[0-9A-Za-z_\-]{30,}"  # Google OAuth
    r"|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"  # Shopify
    r"|r8_[A-Za-z0-9]{30,}"  # Replicate
    r"|pplx-[A-Za-z0-9]{40,}"  # Perplexity
    r"|xai-[A-Za-z0-9]{40,}"  # xAI
    r"|\d{6,12}:AA[A-Za-z0-9_\-]{30,40}"  # Telegram bot
    r"|key-[0-9a-zA-Z]{32}"  # Mailgun
    r"|[0-9a-f]{32}-us\d{1,2}"  # Mailchimp
    r"|sq0(?:atp|csp)-[0-9A-Za-z_\-]{22,}|EAAA[A-Za-z0-9_\-]{40,}"  # Square
    r"|ATATT3[A-Za-z0-9_\-=]{60,}"  # Atlassian
    r"|lin_(?:api|oauth)_[A-Za-z0-9]{32,}"  # Linear
    r"|(?:secret_|ntn_)[A-Za-z0-9]{40,}"  # Notion
    r"|PMAK-[0-9a-f]{24}-[0-9a-f]{34}"  # Postman
    r"|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{32,}"  # Doppler
    r"|pul-[0-9a-f]{40}"  # Pulumi
    r"|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{40,}"  # Terraform Cloud
    r"|figd_[A-Za-z0-9_\-]{32,}"  # Figma
    r"|sntr[ysu]s?_[A-Za-z0-9+/=_\-]{32,}"  # Sentry
    r"|glc_[A-Za-z0-9+/=]{32,}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"  # Grafana
    r"|NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_\-]{32}"  # New Relic
    r"|sbp_[a-f0-9]{40}"  # Supabase
    r"|dckr_pat_[A-Za-z0-9_\-]{20,}"  # Docker Hub
    r"|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"  # LangSmith
    r"|gl(?:dt|rt|ptt|cbt|imt|oas|ft|soat|agent)-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|api_org_[A-Za-z0-9]{30,}"  # Hugging Face organisation
    r"|AGE-SECRET-KEY-1[0-9A-Z]{50,}"  # age
    r"|fw_[A-Za-z0-9]{24,}"  # Fireworks
    r"|HRKU-[A-Za-z0-9_\-]{40,}"  # Heroku
    r"|whsec_[A-Za-z0-9+/=]{24,}"  # Stripe webhooks
    r"|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+"  # Slack app
    r"|[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}"  # Discord bot
    r"|pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"  # Airtable
    r"|AKCp[A-Za-z0-9]{60,}|cmVmdGtu[A-Za-z0-9]{50,}"  # JFrog
    r"|pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.]{32,}"  # PlanetScale
    r"|nfp_[A-Za-z0-9]{36}"  # Netlify
    r"|rnd_[A-Za-z0-9]{32}"  # Render
    r"|fm[12]_[A-Za-z0-9+/=_\-]{40,}"  # Fly.io
    r"|tskey-(?:auth|api|client)-[A-Za-z0-9_\-]{20,}"  # Tailscale
    r"|ops_[A-Za-z0-9]{40,}"  # 1Password service account
    r"|CLOJARS_[a-f0-9]{60}"  # Clojars
    r"|mgx_[A-Za-z0-9]{40,}|nvapi-[A-Za-z0-9_\-]{40,}"  # NVIDIA NGC and API catalogue
    r")"
)


def vendor_tokens(text: str) -> Iterator[tuple[int, int]]:
    """Words that hold a vendor's token, standing alone in the word (or after Telegram's
    `/bot` in a URL)."""
    done = 0
    for run in _ALNUM_RUN.finditer(text):
        if run.start() < done:
            continue
        start, end = run.start(), run.end()
        while start > max(run.start() - 512, 0) and (
            text[start - 1].isalnum() or text[start - 1] in _TOKEN_CHARS
        ):
            start -= 1
        while end < min(run.end() + 512, len(text)) and (
            text[end].isalnum() or text[end] in _TOKEN_CHARS
        ):
            end += 1
        done = end
        word = text[start:end]
        # A token stands alone in its word: it starts the word, follows one of the word's
        # punctuation marks, or follows Telegram's `/bot` in a URL. Only there is it tried.
        for at in _TOKEN_STARTS.finditer(word):
            m = _VENDOR_SHAPES.match(word, at.end())
            if m is not None:
                yield start + m.start(), start + m.end()
