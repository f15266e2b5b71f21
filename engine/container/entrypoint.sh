#!/bin/sh
# One node, HTTP on 0.0.0.0:9200 (published by the runtime), its home in /var/lib/esmem. OPENSEARCH_JAVA_OPTS
# sets the heap as for the official image; arguments are extra SETTING=VALUE pairs (later ones win).
# A development engine: scripts are compiled as often as installs ask (as `esmem engine up` allows).
# shellcheck disable=SC2086 # OPENSEARCH_JAVA_OPTS holds several options
exec java $OPENSEARCH_JAVA_OPTS @/opt/esmem/engine.args dev.esmem.engine.EmbeddedNode /var/lib/esmem 9200 \
  http.host=0.0.0.0 script.disable_max_compilations_rate=true "$@"
