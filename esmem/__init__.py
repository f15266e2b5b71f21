"""esmem: long-term memory for LLM agents, ranked inside Elasticsearch/OpenSearch."""
from .connection import ConnectionConfig
from .engine import Engine
from .errors import EsmemError
from .install import check, install, uninstall
from .merge import MergePolicy
from .ranking import RecallParams
from .store import Memory, MemoryInput, MemoryStore, Recalled, RecallResult, WriteResult

__version__ = "0.1.0"
__all__ = ["ConnectionConfig", "Engine", "EsmemError", "Memory", "MemoryInput", "MemoryStore", "MergePolicy", "RecallParams",
           "RecallResult", "Recalled", "WriteResult", "check", "install", "uninstall"]
