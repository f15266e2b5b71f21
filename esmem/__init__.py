"""esmem: long-term memory for LLM agents, ranked inside Elasticsearch/OpenSearch."""
from esmem.domain.async_store import AsyncMemoryStore
from esmem.domain.installation import check, install
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory, MemoryInput, Recalled, RecallResult, WriteResult
from esmem.errors import EsmemError
from esmem.index.connection import ConnectionConfig
from esmem.index.engine import Engine
from esmem.index.install import uninstall

__version__ = "0.1.0"
__all__ = ["AsyncMemoryStore", "ConnectionConfig", "Engine", "EsmemError", "Memory", "MemoryInput", "MemoryStore", "MergePolicy", "RecallParams",
           "RecallResult", "Recalled", "WriteResult", "check", "install", "uninstall"]
