"""The domain layer: memories and how they are written and ranked, independent of the transport.

`types` (value types), `validate` (one check per concept), `jsonl` (reading memories),
`writer` (the write protocol), `recaller` (recall -> MMR -> recent-N -> reheat), `store`
(the `MemoryStore` façade), `fusion` (the ranking modes as strategies), `ranking` (knobs and the
plain-Python reference of the stored formula), `merge`, `mmr`, `policy`, `analysis`, `importance`.
"""
