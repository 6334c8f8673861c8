// The Nodes & buckets view.

import { api, query } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { bucketSpec, executionLink, stateBadge, timeCell } from "../format.js";
import { changed } from "../render.js";

// Held leases are counted for this many nodes (one request each, every poll); a
// bigger cluster shows "–" for the rest (fencepost ps --owner NODE --counts has them).
export const NODES_COUNTED = 50;

// How many RUNNING executions each node's leases hold: a worker's node id is its
// lease owner.
async function heldLeases(nodes) {
  const counted = nodes.slice(0, NODES_COUNTED);
  const answers = await Promise.all(
    counted.map((n) => api("GET", `/executions/counts${query({ owner: n.id, state: "RUNNING" })}`)),
  );
  return new Map(counted.map((n, i) => [n.id, answers[i].counts.RUNNING ?? 0]));
}

export async function loadNodes() {
  const [nodes, report] = await Promise.all([api("GET", "/nodes"), api("GET", "/buckets")]);
  const held = await heldLeases(nodes);
  return () => {
    if (!changed("nodes", [nodes, report, [...held]])) return;
    const nodeRows = nodes.map((n) =>
      h(
        "tr",
        { "data-node": n.id },
        h("td", { class: "id" }, n.id),
        h("td", {}, n.kind),
        h("td", {}, n.buckets === null ? "any" : bucketSpec(n.buckets)),
        h(
          "td",
          { class: "num held" },
          held.has(n.id)
            ? h("a", { href: `#/executions${query({ owner: n.id, state: "RUNNING" })}`, title: "its running executions" }, held.get(n.id))
            : "–",
        ),
        timeCell(n.started_at),
        timeCell(n.heartbeat_at, true),
        timeCell(n.expires_at, true),
      ),
    );
    $("nodes").replaceChildren(...(nodeRows.length ? nodeRows : [emptyRow(7, "No live nodes.")]));
    // Buckets owned twice, grouped by the nodes that share them: "30-39 (node-a, node-b)".
    const shared = new Map();
    for (const b of report.buckets.filter((b) => b.duplicated)) {
      const owners = b.owners.join(", ");
      shared.set(owners, [...(shared.get(owners) || []), b.bucket]);
    }
    const duplicates = [...shared].map(([owners, buckets]) => `${bucketSpec(buckets)} (${owners})`);
    const summary = [
      ["buckets", report.num_buckets],
      ["owned twice", duplicates.length ? duplicates.join("; ") : "none"],
      ["holes (no live owner)", report.unowned.length ? bucketSpec(report.unowned) : "none"],
      ["claim from any bucket", report.floating.length ? report.floating.join(", ") : "none"],
      ["orphans", report.orphans.length],
    ];
    $("bucket-summary").replaceChildren(
      ...summary.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
    );
    $("bucket-grid").replaceChildren(
      ...report.buckets.map((b) => {
        const status = b.duplicated ? "duplicated" : b.unowned ? "unowned" : b.owners.length ? "owned" : "floating";
        const owners = b.owners.length ? b.owners.join(", ") : report.floating.length ? "any-bucket nodes" : "nobody";
        return h(
          "li",
          { class: `bucket ${status}`, title: `bucket ${b.bucket}: ${b.executions} unfinished; owners: ${owners}` },
          h("span", { class: "bucket-number" }, b.bucket),
          h("span", { class: "bucket-count" }, b.executions),
        );
      }),
    );
    const orphanRows = report.orphans.map((e) =>
      h(
        "tr",
        {},
        h("td", {}, executionLink(e.id)),
        h("td", { class: "job" }, e.job),
        h("td", {}, stateBadge(e.state)),
        h("td", { class: "num" }, e.bucket),
        timeCell(e.due_at, true),
        timeCell(e.updated_at, true),
      ),
    );
    $("orphans").replaceChildren(...(orphanRows.length ? orphanRows : [emptyRow(6, "No orphans.")]));
  };
}
