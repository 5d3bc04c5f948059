"""Re-fetch the console's vendored front-end libraries from npm and check them.

The console, `/docs` and the GraphQL explorer must work offline (a field office), so the
browser libraries they use are committed under
`src/twinhub/console/static/vendor/<package>-<version>/`, with their licences. This script
makes those copies reproducible:

    python tools/vendor_assets.py          # npm pack each pinned package, check its
                                            # integrity, copy the files, write manifest.json
    python tools/vendor_assets.py --check   # offline: the committed files match manifest.json

`npm pack` downloads the exact published tarball; its SHA-512 must equal the integrity
pinned below (the value npm's registry publishes as `dist.integrity`), so a tampered
registry answer or a typo in a version stops the update. Node.js is needed only here,
never to run twinhub.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "src/twinhub/console/static/vendor"
MANIFEST = VENDOR / "manifest.json"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    integrity: str  # npm's dist.integrity of the tarball
    files: tuple[str, ...]  # paths inside the tarball's package/ folder
    licence_from: str | None = None  # a package whose LICENSE covers this one

    @property
    def folder(self) -> str:
        return f"{self.name.replace('@', '').replace('/', '-')}-{self.version}"


PACKAGES = (
    Package(
        "uplot",
        "1.6.32",
        "sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw==",
        ("dist/uPlot.iife.min.js", "dist/uPlot.min.css", "LICENSE"),
    ),
    Package(
        "cytoscape",
        "3.34.4",
        "sha512-msY99tMY8iWTg+sIPGfSqDcPNOt4xcj+v/K/7qUFaCUxxlqnMkUYLBjRUzn9W5CU/R2hrmtJa5+UtovrEM2ctg==",
        ("dist/cytoscape.min.js", "LICENSE"),
    ),
    Package(
        "swagger-ui-dist",
        "5.35.0",
        "sha512-U06rpMtW9V3XPGOBeamTUSr0Z09jMX4IJuANpE/EZbAhw0G8CgwrzU4YmXkn/h0wCDNsXdGarTNNHC3sU8yVUQ==",
        ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "LICENSE", "NOTICE"),
    ),
    Package(
        "react",
        "18.2.0",
        "sha512-/3IjMdb2L9QbBdWiW5e3P2/npwMBaU9mHCSCUzNln0ZCYbcfTsGbTJrU/kGemdH2IWmB2ioZ+zkxtmq6g09fGQ==",
        ("umd/react.production.min.js", "LICENSE"),
    ),
    Package(
        "react-dom",
        "18.2.0",
        "sha512-6IMTriUmvsjHUjNtEDudZfuDQUoWXVxKHhlEGSk81n4YFS+r/Kl99wXiwlVXtPBtJenozv2P+hxDsw9eA7Xo6g==",
        ("umd/react-dom.production.min.js", "LICENSE"),
    ),
    Package(
        "js-cookie",
        "3.0.5",
        "sha512-cEiJEAEoIbWfCZYKWhVwFuvPX1gETRYPw6LlaTKoxD3s2AkXzkCjnp6h0V77ozyqj0jakteJ4YqDJT830+lVGw==",
        ("dist/js.cookie.min.js", "LICENSE"),
    ),
    Package(
        "graphiql",
        "3.8.3",
        "sha512-cuPDYtXVKV86Pu5PHBX642Odi/uVEE2y1Jxq5rGO/Qy1G2lRp7ZZ7a/T30RzxhuLSWo9zUbzq0P3U49//H0Ugw==",
        ("graphiql.min.js", "graphiql.min.css", "LICENSE"),
    ),
    Package(
        "@graphiql/plugin-explorer",
        "1.0.2",
        "sha512-9j+kg2UjtLZD5EBmGjeWHkoVVxtbShYg2DzbUVebibnZYZM/iMBEF4vaccXJIAm5KaomIPLx0aoNs4LbODyc3Q==",
        ("dist/index.umd.js", "dist/style.css"),
        # Its tarball has no LICENSE file; package.json says MIT, from the graphql/graphiql
        # repository, whose LICENSE graphiql's tarball carries.
        licence_from="graphiql",
    ),
)


def sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(package: Package, work: Path) -> Path:
    """The package's tarball, downloaded by `npm pack` and checked against its integrity."""
    spec = f"{package.name}@{package.version}"
    made = subprocess.run(  # noqa: S603 (a fixed command, our own pinned names)
        ["npm", "pack", spec, "--json", "--pack-destination", str(work)],  # noqa: S607
        capture_output=True,
        text=True,
        check=True,
        cwd=work,
    )
    tarball = work / json.loads(made.stdout)[0]["filename"]
    actual = sri(tarball.read_bytes())
    if actual != package.integrity:
        raise SystemExit(f"{spec}: integrity {actual} is not the pinned {package.integrity}")
    return tarball


def unpack(package: Package, tarball: Path, licences: dict[str, bytes]) -> dict[str, str]:
    target = VENDOR / package.folder
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    hashes: dict[str, str] = {}
    with tarfile.open(tarball) as archive:
        for name in package.files:
            member = archive.extractfile(f"package/{name}")
            if member is None:
                raise SystemExit(f"{package.name}: {name} is not a file")
            data = member.read()
            out = target / Path(name).name
            out.write_bytes(data)
            hashes[f"{package.folder}/{out.name}"] = hashlib.sha256(data).hexdigest()
            if name == "LICENSE":
                licences[package.name] = data
    if package.licence_from is not None:
        note = (
            f"{package.name} {package.version} is published under the MIT licence "
            f"(package.json) from the graphql/graphiql repository; its tarball has no "
            f"LICENSE file, so the repository's, as {package.licence_from} ships it, "
            "follows.\n\n"
        ).encode()
        out = target / "LICENSE"
        out.write_bytes(note + licences[package.licence_from])
        hashes[f"{package.folder}/LICENSE"] = sha256(out)
    return hashes


def update() -> None:
    hashes: dict[str, str] = {}
    licences: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as work:
        for package in PACKAGES:
            hashes |= unpack(package, fetch(package, Path(work)), licences)
            print(f"{package.name}@{package.version} -> vendor/{package.folder}")
    manifest = {
        "packages": {p.name: {"version": p.version, "integrity": p.integrity} for p in PACKAGES},
        "files": dict(sorted(hashes.items())),
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")


def check() -> list[str]:
    """Problems with the committed copies (empty when they match the manifest)."""
    manifest = json.loads(MANIFEST.read_text())
    problems = []
    expected = {p.name: p.version for p in PACKAGES}
    pinned = {name: entry["version"] for name, entry in manifest["packages"].items()}
    if pinned != expected:
        problems.append(f"manifest pins {pinned}, this script {expected}")
    for name, digest in manifest["files"].items():
        path = VENDOR / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256(path) != digest:
            problems.append(f"{name}: changed since it was fetched")
    for package in PACKAGES:
        if not (VENDOR / package.folder / "LICENSE").is_file():
            problems.append(f"{package.folder}: no LICENSE")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify offline, change nothing")
    if parser.parse_args().check:
        problems = check()
        for problem in problems:
            print(problem, file=sys.stderr)
        sys.exit(1 if problems else 0)
    update()


if __name__ == "__main__":
    main()
