// A brokering client for the 2026-07-28 era, written from PROTOCOL.md ("The 2026-07-28 era") alone:
// no SDK, plain fetch over Streamable HTTP with no session. It lists the extension
// io.github.jupyter-fsbroker/files in every request's _meta, shares one folder as a root, approves
// every consent it is asked, performs each batch a tools/call answers with, and continues the call
// with the answers until a plain CallToolResult arrives. It is one connection alone: it enforces
// roots and grants, not sensitive names, and its locks keep out no one else.
//
// Usage:
//   node modern_client.mjs --root DIR --url URL --calls JSON [--features perPathConsent,changes]
//        [--revoke-after-consents N]
// --revoke-after-consents N drops every grant once N consents were answered, and answers no
// further consent (the user revoked): later operations are PERMISSION_DENIED.
//
// Each call of --calls is {"name", "arguments"}, or {"name", "arguments", "touch": {"path": P}}:
// P (root-relative) is written when the call's first files/changes arrives, so a watching tool
// sees a change made outside the broker while it waits.
//
// Prints one JSON object: {"discover": result, "tools": [...], "results": [...], "answered":
// [method, ...], "consents": [params, ...], "rounds": [[method, ...] per batch], "connection": id}.

import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const VERSION = "2026-07-28";
const EXTENSION = "io.github.jupyter-fsbroker/files";
const BATCH = "io.github.jupyter-fsbroker/filesBatch";
const OPERATIONS = ["read", "write", "delete", "watch"];
const MiB = 1024 * 1024;
const MAX_EVENTS_KEPT = 10_000;

// Named errors: on the modern wire each is its legacy code plus 1000.
const CODES = {
  FILE_LOCKED: -31100,
  PERMISSION_DENIED: -31101,
  NOT_FOUND: -31102,
  ALREADY_EXISTS: -31103,
  PRECONDITION_FAILED: -31104,
  WRONG_TYPE: -31105,
  TOO_LARGE: -31106,
  RATE_LIMITED: -31107,
  ENCODING_ERROR: -31108,
};
const INVALID_PARAMS = -32602;
const METHOD_NOT_FOUND = -32601;
const INTERNAL_ERROR = -32603;

class WireError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }

  toJSON() {
    const error = { code: this.code, message: this.message };
    if (this.data !== undefined) error.data = this.data;
    return error;
  }
}

function named(name, message, reason, extra = {}) {
  return new WireError(CODES[name], message, { error: name, reason, ...extra });
}

function invalid(message, extra) {
  return new WireError(INVALID_PARAMS, message, extra);
}

function parseArgs(argv) {
  const options = { calls: [], features: ["perPathConsent", "changes"], revokeAfter: Infinity };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--root") options.root = path.resolve(argv[++i]);
    else if (arg === "--url") options.url = argv[++i];
    else if (arg === "--calls") options.calls = JSON.parse(argv[++i]);
    else if (arg === "--features") options.features = argv[++i].split(",").filter(Boolean);
    else if (arg === "--revoke-after-consents") options.revokeAfter = Number(argv[++i]);
    else throw new Error(`unknown argument ${arg}`);
  }
  if (!options.root || !options.url) throw new Error("--root and --url are required");
  return options;
}

function etagOf(stat) {
  return `${stat.size.toString(16)}-${stat.mtimeNs.toString(16)}-${stat.ino.toString(16)}`;
}

function mimeOf(file) {
  const ext = path.extname(file).toLowerCase();
  return { ".csv": "text/csv", ".txt": "text/plain", ".md": "text/markdown", ".json": "application/json" }[ext]
    ?? "application/octet-stream";
}

function typeOf(stat) {
  if (stat.isFile()) return "file";
  if (stat.isDirectory()) return "directory";
  if (stat.isSymbolicLink()) return "symlink";
  return "other";
}

function decode(bytes, encoding) {
  if (encoding === "base64") return bytes.toString("base64");
  if (encoding !== "utf-8" && encoding !== "utf8") throw invalid(`unknown encoding ${encoding}`);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw named("ENCODING_ERROR", "the content is not valid utf-8; ask for base64", "invalid_content");
  }
}

function encode(content, encoding) {
  if (typeof content !== "string") throw invalid("content must be a string");
  if (encoding === "base64") return Buffer.from(content, "base64");
  if (encoding !== "utf-8" && encoding !== "utf8") throw invalid(`unknown encoding ${encoding}`);
  return Buffer.from(content, "utf8");
}

/** The files/* side of one connection: grants, locks, staged uploads, watches. */
class Files {
  constructor(root, features) {
    this.root = fs.realpathSync(root);
    this.name = path.basename(this.root);
    this.perPath = features.includes("perPathConsent");
    this.grants = new Map(); // root-relative path ("" is the root) -> Set of operations
    this.locks = new Map(); // lockId -> absolute path
    this.uploads = new Map(); // absolute path -> {chunks: Buffer[], size}
    this.watches = new Map(); // watchId -> watch
    this.answered = [];
    this.consents = [];
    this.revoked = false;
    this.revokeAfter = Infinity;
  }

  close() {
    for (const watch of this.watches.values()) watch.watcher.close();
    this.watches.clear();
  }

  /** A path as PROTOCOL.md writes it -> {rel, abs}; outside paths are refused before any lookup. */
  resolve(given) {
    if (typeof given !== "string" || given.includes("\0")) throw invalid("path must be a string without NUL");
    let rest;
    if (given.startsWith("file://")) {
      const url = new URL(given);
      if (url.host !== "" && url.host !== "localhost") throw named("PERMISSION_DENIED", "not in a root", "outside_roots", { path: given });
      rest = path.relative(this.root, fileURLToPath(`file://${url.pathname}`));
    } else if (path.isAbsolute(given)) {
      rest = path.relative(this.root, given);
    } else if (given === this.name || given.startsWith(this.name + "/")) {
      rest = given.slice(this.name.length + 1);
    } else {
      rest = given; // one root: a path whose first segment names no root is relative to it
    }
    const abs = path.resolve(this.root, rest);
    if (abs !== this.root && !abs.startsWith(this.root + path.sep)) {
      throw named("PERMISSION_DENIED", `${given} is outside the shared folders`, "outside_roots", { path: given });
    }
    // Symlinks may not lead out of the root: judge the real target when there is one.
    let real = abs;
    try {
      real = fs.realpathSync(abs);
    } catch {
      real = abs;
    }
    if (real !== this.root && !real.startsWith(this.root + path.sep)) {
      throw named("PERMISSION_DENIED", `${given} is outside the shared folders`, "outside_roots", { path: given });
    }
    const rel = path.relative(this.root, abs).split(path.sep).join("/");
    return { rel, abs, shown: rel === "" ? this.name : `${this.name}/${rel}` };
  }

  covers(rel, op) {
    for (const [granted, ops] of this.grants) {
      if (ops.has(op) && (granted === "" || rel === granted || rel.startsWith(granted + "/"))) return true;
    }
    return false;
  }

  check(given, op) {
    const where = this.resolve(given);
    if (!this.covers(where.rel, op)) {
      if (this.revoked) throw named("PERMISSION_DENIED", `the user revoked ${op} on ${given}`, "revoked", { path: given });
      throw named("PERMISSION_DENIED", `${given} is not granted for ${op}`, "not_granted", { path: given });
    }
    return where;
  }

  /** The lock on abs, unless it is this connection's own (owners need not pass lockId). */
  lockOf(abs) {
    for (const [id, locked] of this.locks) if (locked === abs) return id;
    return undefined;
  }

  newLock(abs) {
    const id = this.lockOf(abs) ?? `lock_${crypto.randomBytes(16).toString("hex")}`;
    this.locks.set(id, abs);
    return id;
  }

  stat(given) {
    try {
      return fs.lstatSync(given.abs, { bigint: true });
    } catch {
      throw named("NOT_FOUND", `${given.shown} does not exist`, "not_found", { path: given.shown });
    }
  }

  // -- methods -------------------------------------------------------------------------------

  "roots/list"() {
    return { roots: [], _meta: { filesystemBrokering: { roots: [{ name: this.name }] } } };
  }

  "files/consent"(params) {
    this.consents.push(params);
    const operations = params.operations ?? OPERATIONS;
    const approved = [];
    const refusing = this.revoked || this.consents.length > this.revokeAfter;
    for (const item of params.requestedPaths ?? []) {
      if (typeof item !== "string" && !this.perPath) continue;
      const given = typeof item === "string" ? item : item.path;
      const wanted = typeof item === "string" ? operations : (item.operations ?? operations);
      let where;
      try {
        where = this.resolve(given);
      } catch {
        continue; // outside the roots: never approvable
      }
      const already = wanted.every((op) => this.covers(where.rel, op));
      if (refusing && !already) continue;
      const ops = this.grants.get(where.rel) ?? new Set();
      for (const op of wanted) ops.add(op);
      this.grants.set(where.rel, ops);
      approved.push({ path: given, operations: [...wanted] });
    }
    if (this.consents.length >= this.revokeAfter) this.revoke();
    const union = OPERATIONS.filter((op) => approved.some((entry) => entry.operations.includes(op)));
    const result = { granted: approved.length > 0, approvedPaths: approved.map((e) => e.path), operations: union };
    if (this.perPath) result.approved = approved;
    return result;
  }

  /** The user revokes every grant of the connection; consents are refused from then on. */
  revoke() {
    this.revoked = true;
    this.grants.clear();
  }

  "files/read"(params) {
    const where = this.check(params.path, "read");
    const encoding = params.encoding ?? "utf-8";
    const stat = this.stat(where);
    if (stat.isDirectory()) throw named("WRONG_TYPE", `${where.shown} is a folder`, "is_directory", { path: params.path });
    const offset = params.offset ?? 0;
    const length = Math.min(params.length ?? MiB, 2 * MiB);
    if (!Number.isInteger(offset) || offset < 0 || !Number.isInteger(length) || length < 0) throw invalid("bad offset or length");
    const data = fs.readFileSync(where.abs);
    let end = Math.min(data.length, offset + length);
    if (encoding !== "base64") {
      // Text chunks end on a character boundary: back off from inside a UTF-8 sequence.
      while (end < data.length && end > offset && (data[end] & 0xc0) === 0x80) end--;
    }
    const slice = data.subarray(Math.min(offset, data.length), end);
    const result = {
      content: decode(slice, encoding),
      encoding,
      size: data.length,
      offset,
      bytesRead: slice.length,
      eof: end >= data.length,
      mimeType: mimeOf(where.abs),
      etag: etagOf(stat),
    };
    if (params.keepLocked) result.lockId = this.newLock(where.abs);
    return result;
  }

  "files/write"(params) {
    const where = this.check(params.path, "write");
    const bytes = encode(params.content, params.encoding ?? "utf-8");
    if (bytes.length > 2 * MiB) throw named("TOO_LARGE", "over 2 MiB in one request: use chunks", "too_large", { maxBytes: 2 * MiB });
    let exists = fs.existsSync(where.abs);
    if (exists && fs.statSync(where.abs).isDirectory()) throw named("WRONG_TYPE", `${where.shown} is a folder`, "is_directory", { path: params.path });
    if (params.ifMatch !== undefined && (!exists || etagOf(fs.statSync(where.abs, { bigint: true })) !== params.ifMatch)) {
      throw named("PRECONDITION_FAILED", `${where.shown} changed`, "etag_mismatch", { path: params.path });
    }
    if (params.offset !== undefined) {
      // A staged upload: chunks in order, committed by the one with final: true.
      const staged = params.offset === 0 ? { chunks: [], size: 0 } : this.uploads.get(where.abs);
      const expected = staged?.size ?? 0;
      if (staged === undefined || params.offset !== expected) {
        throw invalid(`the next chunk starts at ${expected}`, { expectedOffset: expected });
      }
      staged.chunks.push(bytes);
      staged.size += bytes.length;
      this.uploads.set(where.abs, staged);
      if (!params.final) return { bytesWritten: bytes.length, size: staged.size, etag: "" };
      this.uploads.delete(where.abs);
      return this.commit(where, Buffer.concat(staged.chunks), params, bytes.length, exists);
    }
    return this.commit(where, bytes, params, bytes.length, exists);
  }

  commit(where, bytes, params, written, exists) {
    if (!exists && params.create === false) throw named("NOT_FOUND", `${where.shown} does not exist`, "not_found", { path: params.path });
    if (exists && params.exclusive) throw named("ALREADY_EXISTS", `${where.shown} exists`, "exists", { path: params.path });
    const temp = path.join(path.dirname(where.abs), `.${path.basename(where.abs)}.${crypto.randomBytes(6).toString("hex")}.tmp`);
    const fd = fs.openSync(temp, "w", exists ? fs.statSync(where.abs).mode & 0o7777 : 0o644);
    try {
      fs.writeSync(fd, bytes);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, where.abs);
    const result = { bytesWritten: written, size: bytes.length, etag: etagOf(fs.statSync(where.abs, { bigint: true })) };
    if (params.keepLocked) result.lockId = this.newLock(where.abs);
    return result;
  }

  "files/stat"(params) {
    const where = this.check(params.path, "read");
    const stat = this.stat(where);
    return {
      path: where.shown,
      type: typeOf(stat),
      size: Number(stat.size),
      mtime: new Date(Number(stat.mtimeMs)).toISOString(),
      etag: etagOf(stat),
      mimeType: mimeOf(where.abs),
      locked: this.lockOf(where.abs) !== undefined,
    };
  }

  "files/list"(params) {
    const where = this.check(params.path, "read");
    if (!this.stat(where).isDirectory()) throw named("WRONG_TYPE", `${where.shown} is not a folder`, "not_directory", { path: params.path });
    const entries = [];
    const walk = (abs, prefix) => {
      for (const name of fs.readdirSync(abs).sort()) {
        if (name.startsWith(".") && !params.includeHidden) continue;
        const child = path.join(abs, name);
        const stat = fs.lstatSync(child);
        const shown = `${prefix}/${name}`;
        entries.push({ name, path: shown, type: typeOf(stat), size: stat.size, mtime: stat.mtime.toISOString() });
        if (params.recursive && stat.isDirectory()) walk(child, shown);
      }
    };
    walk(where.abs, where.shown);
    return { entries: entries.slice(0, params.maxEntries ?? 10_000) };
  }

  "files/create"(params) {
    const where = this.check(params.path, "write");
    if (fs.existsSync(where.abs)) throw named("ALREADY_EXISTS", `${where.shown} exists`, "exists", { path: params.path });
    if (params.type === "directory") fs.mkdirSync(where.abs, { recursive: Boolean(params.parents) });
    else {
      if (params.parents) fs.mkdirSync(path.dirname(where.abs), { recursive: true });
      fs.writeFileSync(where.abs, encode(params.content ?? "", params.encoding ?? "utf-8"));
    }
    const result = { path: where.shown, type: params.type ?? "file" };
    if (params.keepLocked) result.lockId = this.newLock(where.abs);
    return result;
  }

  "files/unlock"(params) {
    if (!this.locks.delete(params.lockId)) throw named("NOT_FOUND", "no such lock", "unknown_lock");
    return { unlocked: true };
  }

  "files/watch"(params) {
    const where = this.check(params.path, "watch");
    this.stat(where);
    const id = `w_${crypto.randomBytes(12).toString("hex")}`;
    const wanted = new Set(params.events ?? ["created", "modified", "deleted", "moved"]);
    const watch = { events: [], base: 0, waiters: new Set(), watcher: null };
    const isDir = fs.statSync(where.abs).isDirectory();
    watch.watcher = fs.watch(where.abs, { recursive: Boolean(params.recursive) && isDir }, (kind, name) => {
      const abs = isDir && name ? path.join(where.abs, name.toString()) : where.abs;
      const rel = path.relative(this.root, abs).split(path.sep).join("/");
      const event = kind === "rename" ? (fs.existsSync(abs) ? "created" : "deleted") : "modified";
      if (!wanted.has(event) || !this.covers(rel, "watch")) return;
      const shown = `${this.name}/${rel}`;
      const last = watch.events[watch.events.length - 1];
      // Bursts on one path coalesce: the last state is what counts.
      if (last && last.path === shown && last.event === event) {
        last.timestamp = new Date().toISOString();
        return;
      }
      watch.events.push({ watchId: id, path: shown, event, timestamp: new Date().toISOString() });
      if (watch.events.length > MAX_EVENTS_KEPT) {
        watch.events.shift();
        watch.base++;
      }
      for (const wake of watch.waiters) wake();
    });
    this.watches.set(id, watch);
    return { watchId: id };
  }

  async "files/changes"(params) {
    const watch = this.watches.get(params.watchId);
    if (watch === undefined) throw named("NOT_FOUND", "no such watch", "unknown_watch");
    // The cursor is the sequence number of the next event: "k<n>".
    let position = watch.base;
    if (params.cursor !== undefined) {
      const match = /^k(\d+)$/.exec(String(params.cursor));
      const n = match ? Number(match[1]) : -1;
      if (n < 0 || n > watch.base + watch.events.length) throw invalid("unknown cursor", { reason: "bad_cursor", param: "cursor" });
      position = n;
    }
    const dropped = position < watch.base;
    position = Math.max(position, watch.base);
    const waitMs = Math.min(Math.max(params.waitMs ?? 0, 0), 30_000);
    if (position === watch.base + watch.events.length && waitMs > 0) {
      await new Promise((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          watch.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, waitMs);
        watch.waiters.add(wake);
      });
    }
    const max = params.maxEvents ?? 1000;
    const events = watch.events.slice(position - watch.base, position - watch.base + max);
    return { events, cursor: `k${position + events.length}`, dropped };
  }

  "files/unwatch"(params) {
    const watch = this.watches.get(params.watchId);
    if (watch === undefined) throw named("NOT_FOUND", "no such watch", "unknown_watch");
    watch.watcher.close();
    for (const wake of watch.waiters) wake();
    this.watches.delete(params.watchId);
    return {};
  }

  // -- batches -------------------------------------------------------------------------------

  async answer(operation) {
    const { id, method, params } = operation;
    this.answered.push(method);
    const handler = (method.startsWith("files/") || method === "roots/list") && Object.hasOwn(Files.prototype, method) ? this[method] : undefined;
    if (handler === undefined) return { id, error: { code: METHOD_NOT_FOUND, message: `unknown method ${method}` } };
    if (params === null || typeof params !== "object" || Array.isArray(params)) {
      return { id, error: { code: INVALID_PARAMS, message: "params must be an object" } };
    }
    try {
      return { id, result: await handler.call(this, params) };
    } catch (error) {
      if (error instanceof WireError) return { id, error: error.toJSON() };
      return { id, error: { code: INTERNAL_ERROR, message: String(error?.message ?? error) } };
    }
  }

  /** Every operation of a batch: concurrent, except same-path ones in order and consent first. */
  async perform(operations) {
    const chains = new Map(); // path -> promise of the last operation on it
    const all = [];
    let barrier = Promise.resolve();
    for (const operation of operations) {
      const params = operation.params ?? {};
      if (operation.method === "files/consent") {
        const before = Promise.all(all);
        const done = before.then(() => this.answer(operation));
        barrier = done;
        all.push(done);
        continue;
      }
      const keys = [params.path, params.newPath].filter((key) => typeof key === "string");
      const waits = [barrier, ...keys.map((key) => chains.get(key)).filter(Boolean)];
      const done = Promise.all(waits).then(() => this.answer(operation));
      for (const key of keys) chains.set(key, done);
      all.push(done);
    }
    return Promise.all(all);
  }
}

/** JSON-RPC over the 2026-07-28 Streamable HTTP wire: one POST per request, no session. */
class Wire {
  constructor(url, features) {
    this.url = url;
    this.nextId = 1;
    this.capabilities = { extensions: { [EXTENSION]: { features } } };
  }

  async request(method, params = {}, extraHeaders = {}) {
    const id = this.nextId++;
    const meta = {
      ...(params._meta ?? {}),
      "io.modelcontextprotocol/protocolVersion": VERSION,
      "io.modelcontextprotocol/clientCapabilities": this.capabilities,
      "io.modelcontextprotocol/clientInfo": { name: "ts-modern-brokering-client", version: "1.0.0" },
    };
    const body = { jsonrpc: "2.0", id, method, params: { ...params, _meta: meta } };
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": VERSION,
      "Mcp-Method": method,
    };
    if (method === "tools/call") headers["Mcp-Name"] = params.name;
    Object.assign(headers, extraHeaders);
    const response = await fetch(this.url, { method: "POST", headers, body: JSON.stringify(body) });
    const type = response.headers.get("content-type") ?? "";
    const text = await response.text();
    if (process.env.MODERN_CLIENT_TRACE) process.stderr.write(`> ${JSON.stringify(body).slice(0, 600)}\n< ${text.slice(0, 600)}\n`);
    let message;
    if (type.startsWith("text/event-stream")) {
      for (const block of text.split(/\r?\n\r?\n/)) {
        const data = block.split(/\r?\n/).filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart()).join("\n");
        if (!data) continue;
        const candidate = JSON.parse(data);
        if (candidate.id === id) message = candidate;
      }
    } else if (text) {
      message = JSON.parse(text);
    }
    if (message === undefined) throw new Error(`HTTP ${response.status} with no answer to ${method}: ${text.slice(0, 200)}`);
    if (message.error) throw new WireError(message.error.code, message.error.message, message.error.data);
    return message.result;
  }
}

function touch(files, spec) {
  const target = path.join(files.root, spec.path.replace(new RegExp(`^${files.name}/`), ""));
  fs.writeFileSync(target, spec.content ?? "touched\n");
}

async function callTool(wire, files, connection, call, rounds) {
  const args = call.arguments ?? {};
  let result = await wire.request("tools/call", { name: call.name, arguments: args, _meta: { [EXTENSION]: { connection } } });
  let touched = false;
  while (result?.resultType === BATCH) {
    const { operations, continuation } = result;
    if (!Array.isArray(operations) || operations.length < 1 || operations.length > 64 || typeof continuation !== "string") {
      throw new Error(`a malformed batch: ${JSON.stringify(result).slice(0, 300)}`);
    }
    const ids = new Set(operations.map((op) => op.id));
    if (ids.size !== operations.length || ![...ids].every((id) => typeof id === "string")) {
      throw new Error("batch operation ids must be distinct strings");
    }
    rounds.push(operations.map((op) => op.method));
    if (call.touch && !touched && operations.some((op) => op.method === "files/changes")) {
      touched = true;
      touch(files, call.touch);
    }
    const answers = await files.perform(operations);
    const meta = { [EXTENSION]: { connection, continuation, answers } };
    // A continuation that names the instance holding the call goes to it (PROTOCOL.md, "Routing").
    const instance = continuation.includes("~") ? continuation.slice(0, continuation.indexOf("~")) : "";
    const route = instance ? { "Fsbroker-Instance": instance } : {};
    result = await wire.request("tools/call", { name: call.name, arguments: args, _meta: meta }, route);
  }
  return result;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const files = new Files(options.root, options.features);
  files.revokeAfter = options.revokeAfter;
  const wire = new Wire(options.url, options.features);
  const connection = `c_${crypto.randomBytes(16).toString("base64url")}`;
  const discover = await wire.request("server/discover");
  const offered = discover?.capabilities?.extensions?.[EXTENSION];
  if (offered?.resultType !== BATCH) throw new Error(`the server does not list ${EXTENSION}`);
  const tools = (await wire.request("tools/list")).tools;
  const results = [];
  const rounds = [];
  for (const call of options.calls) {
    try {
      results.push(await callTool(wire, files, connection, call, rounds));
    } catch (error) {
      if (!(error instanceof WireError)) throw error;
      results.push({ rpcError: error.toJSON() });
    }
  }
  files.close();
  const out = { discover, tools, results, answered: files.answered, consents: files.consents, rounds, connection };
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((error) => {
  process.stderr.write(`modern_client: ${error?.stack ?? error}\n`);
  process.exit(1);
});
