"""The index layer: the only code that talks to the engine.

`connection` (how to reach a cluster), `engine` (the client adapter: typed calls, errors mapped
at the boundary), `catalog` (one typed call per stored template/script of an installed prefix),
`install` (putting the index, templates and scripts in place), `templates` (rendering the asset
files), `grant` (per-agent credentials through the security APIs). No other package builds a REST
path or a request body.
"""
