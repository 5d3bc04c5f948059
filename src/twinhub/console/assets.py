"""Where the vendored front-end libraries live, and the pages of others that use them.

The files come from npm through tools/vendor_assets.py (pinned versions, checked integrity,
their licences beside them) and are served from `/console/static/vendor/`, so `/docs`, the
GraphQL explorer and the console work without reaching any CDN.
"""

from __future__ import annotations

import re
from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
TEMPLATE_DIR = Path(__file__).parent / "templates"
STATIC_URL = "/console/static"
VENDOR_URL = f"{STATIC_URL}/vendor"

SWAGGER_JS = f"{VENDOR_URL}/swagger-ui-dist-5.35.0/swagger-ui-bundle.js"
SWAGGER_CSS = f"{VENDOR_URL}/swagger-ui-dist-5.35.0/swagger-ui.css"
SWAGGER_FAVICON = f"{VENDOR_URL}/swagger-ui-dist-5.35.0/favicon-32x32.png"

# unpkg paths in strawberry's GraphiQL page -> the same files, vendored. The page's SRI
# hashes stay: the vendored bytes are npm's, so they still match.
_GRAPHIQL_FILES = {
    "react@18.2.0/umd/react.production.min.js": "react-18.2.0/react.production.min.js",
    "react-dom@18.2.0/umd/react-dom.production.min.js": (
        "react-dom-18.2.0/react-dom.production.min.js"
    ),
    "js-cookie@3.0.5/dist/js.cookie.min.js": "js-cookie-3.0.5/js.cookie.min.js",
    "graphiql@3.8.3/graphiql.min.css": "graphiql-3.8.3/graphiql.min.css",
    "graphiql@3.8.3/graphiql.min.js": "graphiql-3.8.3/graphiql.min.js",
    "@graphiql/plugin-explorer@1.0.2/dist/style.css": ("graphiql-plugin-explorer-1.0.2/style.css"),
    "@graphiql/plugin-explorer@1.0.2/dist/index.umd.js": (
        "graphiql-plugin-explorer-1.0.2/index.umd.js"
    ),
}
_CDN = re.compile(r"https://unpkg\.com/([^\"']+)")


def offline_graphiql(html: str) -> str:
    """Strawberry's GraphiQL page with every CDN address replaced by a vendored file.

    An address this table does not know (a strawberry upgrade that moved a version) fails
    loudly here rather than quietly loading from the network."""

    def local(match: re.Match[str]) -> str:
        path = match.group(1)
        if path not in _GRAPHIQL_FILES:
            raise RuntimeError(f"GraphiQL wants {path}, which is not vendored")
        return f"{VENDOR_URL}/{_GRAPHIQL_FILES[path]}"

    return _CDN.sub(local, html).replace("crossorigin\n", "\n")
