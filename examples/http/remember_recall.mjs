// Remember a memory and recall it through `esmem serve` from Node.js (18+: global fetch, no packages).
// Needs: ESMEM_SERVE_URL (e.g. http://127.0.0.1:8080), ESMEM_API_KEY (from `esmem serve-key`), ESMEM_NAMESPACE.
const { ESMEM_SERVE_URL, ESMEM_API_KEY, ESMEM_NAMESPACE } = process.env;
const api = `${ESMEM_SERVE_URL}/v1/namespaces/${encodeURIComponent(ESMEM_NAMESPACE)}`;

async function call(path, body) {
  const res = await fetch(api + path, {
    method: "POST",
    headers: { Authorization: `Bearer ${ESMEM_API_KEY}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await res.json();
  if (!res.ok) {
    // every error is {"error": {"type": ..., "message": ...}}
    throw new Error(`${res.status} ${answer.error.type}: ${answer.error.message}`);
  }
  return answer;
}

const written = await call("/memories", { content: "Deploys go out on Thursdays", kind: "rule" });
console.log(`remembered ${written.id}: ${written.action}`);

const found = await call("/recall", { query: "when do deploys go out", k: 3 });
for (const { rank, memory, score } of found.memories) {
  console.log(`${rank}. ${memory.content} (score ${score.toFixed(3)}, id ${memory.id})`);
}
