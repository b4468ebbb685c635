"""Build pytest-pacesim's pure-Python wheel with the standard library alone (no setuptools,
no wheel package, no index): `python3 build_wheel.py OUTDIR`. The release workflow uses
`python -m build`; the name, version and dependency here are pyproject.toml's."""

import base64
import hashlib
import pathlib
import re
import sys
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
project = (HERE / "pyproject.toml").read_text()
NAME = "pytest_pacesim"
VERSION = re.search(r'^version = "([^"]+)"', project, re.M).group(1)
REQUIRES = re.findall(r'^dependencies = \["([^"]+)"\]', project, re.M)
DIST = f"{NAME}-{VERSION}.dist-info"

files = {}
for p in sorted((HERE / NAME).glob("*.py")):
    files[f"{NAME}/{p.name}"] = p.read_bytes()
files[f"{DIST}/METADATA"] = (
    "Metadata-Version: 2.1\nName: pytest-pacesim\nVersion: %s\n"
    "Summary: pytest fixture running pacesim live and conform on your worker program\n"
    "Requires-Python: >=3.8\n%s\n" % (VERSION, "".join("Requires-Dist: %s\n" % r for r in REQUIRES))
).encode()
files[f"{DIST}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: build_wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
files[f"{DIST}/entry_points.txt"] = b"[pytest11]\npacesim = pytest_pacesim\n"


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


record = "".join(f"{n},{digest(d)},{len(d)}\n" for n, d in files.items()) + f"{DIST}/RECORD,,\n"
files[f"{DIST}/RECORD"] = record.encode()
out = pathlib.Path(sys.argv[1]) / f"{NAME}-{VERSION}-py3-none-any.whl"
out.parent.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for n, d in files.items():
        z.writestr(zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0)), d)
print(out)
