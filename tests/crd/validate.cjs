// Validate custom resources against their CRD schemas from @kubernetes-models (pinned in package.json).
// Reads a JSON list of objects on stdin; prints one JSON line per object: {index, kind, ok, error}.
// Exit code 0 when every object is known and valid, 1 otherwise.
"use strict";

const GROUPS = {
  "traefik.io": "@kubernetes-models/traefik",
  "cert-manager.io": "@kubernetes-models/cert-manager",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "keda.sh": "@kubernetes-models/keda",
};

function modelFor(doc) {
  const [group, version] = String(doc.apiVersion || "").split("/");
  const pkg = GROUPS[group];
  if (!pkg || !version) {
    return null;
  }
  try {
    return require(`${pkg}/${group}/${version}`)[doc.kind] || null;
  } catch (err) {
    return null;
  }
}

let input = "";
process.stdin.on("data", (chunk) => {
  input += chunk;
});
process.stdin.on("end", () => {
  let failed = false;
  JSON.parse(input).forEach((doc, index) => {
    const Model = modelFor(doc);
    const line = { index, kind: `${doc.apiVersion}/${doc.kind}`, ok: false, error: null };
    if (!Model) {
      line.error = "no schema for this apiVersion and kind";
    } else {
      try {
        new Model(doc).validate();
        line.ok = true;
      } catch (err) {
        line.error = String(err.message || err);
      }
    }
    failed = failed || !line.ok;
    process.stdout.write(JSON.stringify(line) + "\n");
  });
  process.exit(failed ? 1 : 0);
});
