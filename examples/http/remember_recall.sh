#!/bin/sh
# Remember a memory and recall it through `esmem serve` with curl.
# Needs: ESMEM_SERVE_URL (e.g. http://127.0.0.1:8080), ESMEM_API_KEY (from `esmem serve-key`), ESMEM_NAMESPACE.
set -eu
api="$ESMEM_SERVE_URL/v1/namespaces/$ESMEM_NAMESPACE"

curl --fail-with-body -sS -X POST "$api/memories" \
  -H "Authorization: Bearer $ESMEM_API_KEY" -H "Content-Type: application/json" \
  -d '{"content": "The user is allergic to peanuts", "kind": "fact", "importance": 10}'
echo

curl --fail-with-body -sS -X POST "$api/recall" \
  -H "Authorization: Bearer $ESMEM_API_KEY" -H "Content-Type: application/json" \
  -d '{"query": "peanut allergy", "k": 3}'
echo
