"""AgentBase importer: collects OpenClaw transcripts into an archive.

The flow, one module per stage: ``sources`` (where the files are) ->
``parser`` (bytes to entries and rows, pure) -> ``pipeline`` (one transaction
per file) -> ``store`` (the only module that speaks SQL). ``cli`` is a thin
click layer over them; ``stats`` reads totals back.
"""

__version__ = "0.1.0"
