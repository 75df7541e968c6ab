// A brokering MCP client written on the TypeScript SDK (@modelcontextprotocol/sdk), as another
// project would write one: it advertises roots.filesystemBrokering, shares one folder as a root,
// approves every consent it is asked, and answers files/* in one of two dialects:
//
//   --dialect protocol   as jupyter_fsbroker's PROTOCOL.md says (named errors with data.reason,
//                        reads with offset/bytesRead/eof, consents with operations);
//   --dialect sep        as the SEP-1708 draft's examples do (consent {granted, approvedPaths},
//                        read {content, size, mimeType}, write {bytesWritten}, and a path not
//                        granted refused as {code: -32602, message: "PERMISSION_DENIED"}).
//
// and its consent in one of two forms:
//
//   --consent per-path   lists "perPathConsent" in roots.filesystemBrokeringFeatures and approves
//                        each requestedPaths item with its own operations (PROTOCOL.md,
//                        "Per-path operations");
//   --consent flat       lists no feature and knows only string items in requestedPaths, as in
//                        SEP-1708's own example: an object item is nothing it can approve.
//
// --lie-bytes-read N adds N to every bytesRead it reports (a broken client).
//
// Usage:
//   node brokering_client.mjs --root DIR [--dialect protocol|sep] [--consent per-path|flat]
//        [--lie-bytes-read N] --calls JSON (--url URL | -- COMMAND ARG...)
// Prints one JSON object: {"tools": [...], "results": [...], "answered": [method, ...],
// "consents": [params of each files/consent, as received]}.

import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const OPERATIONS = ["read", "write", "delete", "watch"];

/** @returns {{root: string, dialect: string, consent: string, lie: number, calls: any[], url?: string, command: string[]}} */
function parseArgs(argv) {
  const options = { dialect: "protocol", consent: "per-path", lie: 0, calls: [], command: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      options.command = argv.slice(i + 1);
      break;
    } else if (arg === "--root") options.root = path.resolve(argv[++i]);
    else if (arg === "--dialect") options.dialect = argv[++i];
    else if (arg === "--consent") options.consent = argv[++i];
    else if (arg === "--lie-bytes-read") options.lie = Number(argv[++i]);
    else if (arg === "--calls") options.calls = JSON.parse(argv[++i]);
    else if (arg === "--url") options.url = argv[++i];
    else throw new Error(`unknown argument ${arg}`);
  }
  if (!["per-path", "flat"].includes(options.consent)) throw new Error(`unknown --consent ${options.consent}`);
  return options;
}

/** A JSON-RPC error answer: the SDK sends code, message and data as they are. */
function rpcError(code, message, data) {
  return Object.assign(new Error(message), { code, data });
}

class Files {
  constructor(root, dialect, consent, lie) {
    this.root = fs.realpathSync(root);
    this.name = path.basename(this.root);
    this.dialect = dialect;
    this.perPath = consent === "per-path";
    this.lie = lie;
    /** @type {Map<string, Set<string>>} path (root-relative) -> operations */
    this.grants = new Map();
    this.locks = new Map();
    this.answered = [];
    this.consents = [];
  }

  /** Root-relative "name/rest" (or a bare rest) -> [relative, absolute]; refuses escapes. */
  resolve(given) {
    let rel = String(given).replace(/^\/+/, "");
    if (rel === this.name) rel = "";
    else if (rel.startsWith(this.name + "/")) rel = rel.slice(this.name.length + 1);
    const absolute = path.resolve(this.root, rel);
    if (absolute !== this.root && !absolute.startsWith(this.root + path.sep)) {
      throw this.denied(given, "outside_roots");
    }
    return [path.relative(this.root, absolute).split(path.sep).join("/"), absolute];
  }

  granted(rel, op) {
    for (const [granted, ops] of this.grants) {
      if (ops.has(op) && (granted === "" || rel === granted || rel.startsWith(granted + "/"))) return true;
    }
    return false;
  }

  denied(given, reason) {
    if (this.dialect === "sep") return rpcError(-32602, "PERMISSION_DENIED");
    return rpcError(-32101, `${given} is not granted`, { error: "PERMISSION_DENIED", reason, path: given });
  }

  notFound(given) {
    if (this.dialect === "sep") return rpcError(-32102, "NOT_FOUND");
    return rpcError(-32102, `${given} does not exist`, { error: "NOT_FOUND", reason: "not_found", path: given });
  }

  check(given, op) {
    const [rel, absolute] = this.resolve(given);
    if (!this.granted(rel, op)) throw this.denied(given, "not_granted");
    return absolute;
  }

  consent(params) {
    this.consents.push(params);
    const operations = params.operations ?? OPERATIONS;
    const approved = [];
    for (const item of params.requestedPaths ?? []) {
      // A flat-only client knows string items only; an object is nothing it can approve.
      if (typeof item !== "string" && !this.perPath) continue;
      const given = typeof item === "string" ? item : item.path;
      const wanted = typeof item === "string" ? operations : (item.operations ?? operations);
      const [rel] = this.resolve(given);
      const ops = this.grants.get(rel) ?? new Set();
      for (const op of wanted) ops.add(op);
      this.grants.set(rel, ops);
      approved.push({ path: given, operations: wanted });
    }
    const granted = approved.length > 0;
    const approvedPaths = approved.map((entry) => entry.path);
    if (this.dialect === "sep") return { granted, approvedPaths };
    const union = OPERATIONS.filter((op) => approved.some((entry) => entry.operations.includes(op)));
    const result = { granted, approvedPaths, operations: union };
    if (this.perPath) result.approved = approved;
    return result;
  }

  read(params) {
    const absolute = this.check(params.path, "read");
    const encoding = params.encoding ?? "utf-8";
    if (!fs.existsSync(absolute)) throw this.notFound(params.path);
    const data = fs.readFileSync(absolute);
    const offset = params.offset ?? 0;
    let end = Math.min(data.length, offset + (params.length ?? 1024 * 1024));
    if (encoding !== "base64") {
      // Text chunks end on a character boundary: never inside a UTF-8 sequence.
      while (end < data.length && end > offset && (data[end] & 0xc0) === 0x80) end--;
    }
    const slice = data.subarray(offset, end);
    const content = encoding === "base64" ? slice.toString("base64") : slice.toString("utf8");
    const result = { content, size: data.length, mimeType: absolute.endsWith(".csv") ? "text/csv" : "text/plain" };
    if (params.keepLocked) result.lockId = this.lock(absolute);
    if (this.dialect === "sep") return result;
    const stat = fs.statSync(absolute);
    return {
      ...result,
      encoding,
      offset,
      bytesRead: slice.length + this.lie,
      eof: end >= data.length,
      etag: `${stat.size}-${stat.mtimeMs}`,
    };
  }

  write(params) {
    const absolute = this.check(params.path, "write");
    const bytes = Buffer.from(params.content, params.encoding === "base64" ? "base64" : "utf8");
    fs.writeFileSync(absolute + ".tmp", bytes);
    fs.renameSync(absolute + ".tmp", absolute);
    const result = { bytesWritten: bytes.length };
    if (params.keepLocked) result.lockId = this.lock(absolute);
    if (this.dialect === "sep") return result;
    const stat = fs.statSync(absolute);
    return { ...result, size: stat.size, etag: `${stat.size}-${stat.mtimeMs}` };
  }

  create(params) {
    const absolute = this.check(params.path, "write");
    if (fs.existsSync(absolute)) throw rpcError(-32103, "exists", { error: "ALREADY_EXISTS", reason: "exists" });
    if (params.type === "directory") fs.mkdirSync(absolute);
    else fs.writeFileSync(absolute, params.content ?? "");
    const result = { path: params.path, type: params.type ?? "file" };
    if (params.keepLocked) result.lockId = this.lock(absolute);
    return result;
  }

  stat(params) {
    const absolute = this.check(params.path, "read");
    if (!fs.existsSync(absolute)) throw this.notFound(params.path);
    const stat = fs.statSync(absolute);
    return { path: params.path, type: stat.isDirectory() ? "directory" : "file", size: stat.size, locked: false };
  }

  lock(absolute) {
    const id = "lock_" + Math.random().toString(16).slice(2).padEnd(32, "0").slice(0, 32);
    this.locks.set(id, absolute);
    return id;
  }

  unlock(params) {
    if (!this.locks.delete(params.lockId)) throw rpcError(-32102, "no such lock", { error: "NOT_FOUND" });
    return { unlocked: true };
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const files = new Files(options.root, options.dialect, options.consent, options.lie);
  const roots = { listChanged: true, filesystemBrokering: true };
  if (files.perPath) roots.filesystemBrokeringFeatures = ["perPathConsent"];
  const client = new Client({ name: "ts-brokering-client", version: "1.0.0" }, { capabilities: { roots } });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: pathToFileURL(files.root).href, name: files.name }],
  }));
  for (const method of ["consent", "read", "write", "create", "stat", "unlock"]) {
    const schema = z.object({ method: z.literal(`files/${method}`), params: z.record(z.string(), z.any()) });
    client.setRequestHandler(schema, async (request) => {
      files.answered.push(`files/${method}`);
      return files[method](request.params);
    });
  }
  const transport = options.url
    ? new StreamableHTTPClientTransport(new URL(options.url))
    : new StdioClientTransport({
        command: options.command[0],
        args: options.command.slice(1),
        env: { ...process.env },
        stderr: "inherit",
      });
  await client.connect(transport);
  const tools = (await client.listTools()).tools;
  const results = [];
  for (const call of options.calls) {
    try {
      results.push(await client.callTool({ name: call.name, arguments: call.arguments ?? {} }));
    } catch (error) {
      results.push({ rpcError: { code: error.code, message: error.message } });
    }
  }
  await client.close();
  process.stdout.write(JSON.stringify({ tools, results, answered: files.answered, consents: files.consents }) + "\n");
}

main().catch((error) => {
  process.stderr.write(`brokering_client: ${error?.stack ?? error}\n`);
  process.exit(1);
});
