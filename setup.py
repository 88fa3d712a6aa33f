import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# metadata.yml and templates/ stay at the top of the repository (where Datasette users and the
# issue tracker expect them); an installed package carries a copy, which `agentbase serve` reads
# when there is no source tree beside it.
BUNDLED = ("metadata.yml", "templates")


class BuildWithExplorerFiles(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "datasette_agentbase" / "bundled"
        target.mkdir(parents=True, exist_ok=True)
        for name in BUNDLED:
            src = HERE / name
            if src.is_dir():
                shutil.copytree(src, target / name, dirs_exist_ok=True)
            elif src.is_file():
                shutil.copy2(src, target / name)


setup(
    name="agentbase",
    version="0.1.0",
    description="Archive, search and explore OpenClaw agent transcripts",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["importer", "importer.*", "datasette_agentbase", "datasette_agentbase.*"]),
    package_data={"datasette_agentbase": ["templates/*.html", "static/*"], "importer": ["data/*.json"]},
    python_requires=">=3.10",
    install_requires=[
        "click>=8.1",
        "orjson>=3.8",
        "datasette>=0.65,<1.0",  # the plugin relies on permission_allowed, which 1.0 alphas drop
        "markupsafe>=2.1",
        "pymysql>=1.1",
        "zstandard>=0.20",
        "paramiko>=3.4",
        "PyYAML>=6.0",
        "datasette-json-html>=1.0",
        "detect-secrets>=1.5",  # credentials redacted in the snapshot (importer/redact.py)
        "google-re2>=1.1",  # its one-pass prefilter keeps that cheap
        "sqlite-utils>=4.0",  # the snapshot's schema (importer/snapshot/ddl.py, importer/derived.py); 4.0: writes join an open transaction
        "watchdog>=4.0",  # agentbase watch: local sources followed as files change (inotify, FSEvents)
        # The conversation view: Markdown in messages (CommonMark, raw HTML off, links checked in
        # datasette_agentbase/richtext.py) and code coloured by language (its HTML escapes every token)
        "markdown-it-py>=3.0",
        "Pygments>=2.15",
        # agentbase mcp and /-/agentbase/mcp: the official MCP Python SDK (its MCPServer, stdio and streamable
        # HTTP); 2.x for the API used (mcp.server.mcpserver), below 3 for the next breaking release
        "mcp>=2.3,<3",
    ],
    extras_require={
        "test": ["pytest>=7", "pytest-xdist>=3.5", "hypothesis>=6", "selenium>=4.20", "wheel>=0.40"],  # wheel: tests/test_install.py builds one;
        # pytest-xdist: the suite runs on parallel workers (pytest.ini)
    },
    cmdclass={"build_py": BuildWithExplorerFiles},
    entry_points={
        "console_scripts": ["agentbase=importer.cli:main"],
        "datasette": ["agentbase=datasette_agentbase"],
    },
)
