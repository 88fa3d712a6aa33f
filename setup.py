from setuptools import find_packages, setup

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
    ],
    extras_require={
        "test": ["pytest>=7", "hypothesis>=6", "selenium>=4.20"],
    },
    entry_points={
        "console_scripts": ["agentbase=importer.cli:main"],
        "datasette": ["agentbase=datasette_agentbase"],
    },
)
