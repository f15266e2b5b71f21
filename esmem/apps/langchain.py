"""LangChain retriever over `MemoryStore.recall` (extra `esmem[langchain]`: langchain-core only).

`EsmemRetriever` is a `BaseRetriever`, so it drops into any chain or agent that takes a retriever
(`retriever.invoke(query)`, `create_retriever_tool`, LCEL). Each Document is one memory, best first;
its metadata carries the memory's id, kind, dates and the score components that ranked it, so a
chain can show or filter on why a memory came back. The namespace is fixed per retriever.
"""
from __future__ import annotations

from typing import Any, Sequence

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever

from esmem.apps.dialogue import build_query
from esmem.domain.store import MemoryStore
from esmem.domain.types import Recalled
from esmem.values import check_namespace
from esmem.values import iso

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def document(r: Recalled, rank: int) -> Document:
    """One recalled memory as a Document; score components in metadata."""
    m = r.memory
    return Document(page_content=m.content, id=m.id, metadata={
        "id": m.id, "rank": rank, "kind": m.kind, "importance": m.importance, "valid_from": iso(m.valid_from),
        "entities": list(m.entities), "status": m.status, "supersedes": list(m.supersedes),
        "score": r.score, "rel": r.rel, "recency": r.recency, "importance_part": r.importance_part,
        "reheat": r.reheat, "mmr_penalty": r.mmr_penalty, "rank_before_mmr": r.rank_before_mmr})


def query_from_messages(messages: Sequence[BaseMessage]) -> str:
    """The recall query for a LangChain chat history (acknowledgements and stale topics dropped)."""
    turns = []
    for m in messages:
        if not isinstance(m.content, str):  # multimodal content: keep the text parts
            text = " ".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in m.content)
        else:
            text = m.content
        turns.append({"role": _ROLES.get(m.type, "tool"), "content": text})
    return build_query(turns)


class EsmemRetriever(BaseRetriever):
    """Memories of one namespace, ranked in the engine (relevance x recency x importance, MMR)."""

    store: MemoryStore
    namespace: str
    k: int = 5
    kinds: tuple[str, ...] | None = None
    touch: bool = True
    """Reheat recalled memories (recall counts as use); False for read-only retrieval."""

    def __init__(self, **data: Any) -> None:
        check_namespace(data.get("namespace"))  # before pydantic, so the typed InvalidInput reaches the caller
        super().__init__(**data)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        params = self.store.ranking_params().with_(kinds=tuple(self.kinds)) if self.kinds else None
        res = self.store.recall(query, self.namespace, self.k, params=params, touch=self.touch)
        return [document(r, i) for i, r in enumerate(res.items, 1)]
