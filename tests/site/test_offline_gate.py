"""The strict build is the offline gate: one external script or stylesheet fails it."""
import subprocess
import sys

import pytest
import yaml

from harness import ROOT


def build_with_page(tmp_path, body):
    """Strict-builds a copy of the docs with one extra page; returns (exit code, log)."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "probe.md").write_text("# Probe\n\n" + body + "\n")
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.Loader)
    config.update(docs_dir=str(docs), site_dir=str(tmp_path / "site"),
                  hooks=[str(ROOT / h) for h in config.get("hooks", [])])
    config["theme"]["custom_dir"] = str(ROOT / config["theme"]["custom_dir"])
    config["nav"] = list(config.get("nav", [])) + [{"Probe": "probe.md"}]
    cfg = tmp_path / "mkdocs.yml"
    cfg.write_text(yaml.dump(config))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(cfg)],
                       cwd=ROOT, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def test_local_page_builds(tmp_path):
    code, log = build_with_page(tmp_path, "Nothing external here.")
    assert code == 0, log


@pytest.mark.parametrize("html", [
    '<script src="https://cdn.example.com/lib.js"></script>',
    '<link rel="stylesheet" href="https://cdn.example.com/style.css">',
])
def test_external_asset_fails_strict_build(tmp_path, html):
    code, log = build_with_page(tmp_path, html)
    assert code != 0
    assert "cdn.example.com" in log
