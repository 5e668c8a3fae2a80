// A minimal Language Server Protocol client over stdio (Content-Length framing),
// just enough to drive yaml-language-server the way an editor does.
// Node built-ins only.

import { spawn } from 'node:child_process';

export class LspClient {
  /**
   * @param {string} command  executable (e.g. process.execPath)
   * @param {string[]} args
   * @param {object} opts     { cwd, configuration: (item) => value, log: (line) => void }
   */
  constructor(command, args, opts = {}) {
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, method}
    this.notificationListeners = new Map(); // method -> [fn]
    this.serverRequests = []; // [{method, params}] seen, for reporting
    this.configuration = opts.configuration ?? (() => null);
    this.log = opts.log ?? (() => {});
    this.stderr = '';
    this.exited = null;
    this.buffer = Buffer.alloc(0);

    this.child = spawn(command, args, {
      cwd: opts.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: opts.env ?? process.env,
    });
    this.child.stdout.on('data', (chunk) => this.onData(chunk));
    this.child.stderr.on('data', (chunk) => {
      this.stderr += chunk.toString('utf8');
    });
    this.child.on('exit', (code, signal) => {
      this.exited = { code, signal };
      for (const { reject, method } of this.pending.values()) {
        reject(new Error(`language server exited (code ${code}, signal ${signal}) before answering ${method}`));
      }
      this.pending.clear();
    });
    this.child.on('error', (err) => {
      this.exited = { code: null, signal: null, error: err };
      for (const { reject } of this.pending.values()) reject(err);
      this.pending.clear();
    });
    // A write after the server died must not crash us with EPIPE.
    this.child.stdin.on('error', () => {});
  }

  onData(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const headerEnd = this.buffer.indexOf('\r\n\r\n');
      if (headerEnd < 0) return;
      const header = this.buffer.subarray(0, headerEnd).toString('ascii');
      const match = /Content-Length:\s*(\d+)/i.exec(header);
      if (!match) {
        throw new Error(`bad LSP header from server: ${JSON.stringify(header)}`);
      }
      const length = Number(match[1]);
      const start = headerEnd + 4;
      if (this.buffer.length < start + length) return;
      const body = this.buffer.subarray(start, start + length).toString('utf8');
      this.buffer = this.buffer.subarray(start + length);
      this.dispatch(JSON.parse(body));
    }
  }

  dispatch(msg) {
    if (msg.id !== undefined && msg.method === undefined) {
      // A response to one of our requests.
      const entry = this.pending.get(msg.id);
      if (!entry) return;
      this.pending.delete(msg.id);
      if (msg.error) {
        entry.reject(new Error(`${entry.method} failed: ${msg.error.message} (code ${msg.error.code})`));
      } else {
        entry.resolve(msg.result);
      }
      return;
    }
    if (msg.id !== undefined) {
      // A request from the server: answer it the way VS Code would.
      this.serverRequests.push({ method: msg.method, params: msg.params });
      let result = null;
      let error;
      switch (msg.method) {
        case 'workspace/configuration':
          result = (msg.params?.items ?? []).map((item) => this.configuration(item) ?? null);
          break;
        case 'client/registerCapability':
        case 'client/unregisterCapability':
        case 'window/workDoneProgress/create':
        case 'workspace/codeLens/refresh':
        case 'workspace/semanticTokens/refresh':
          result = null;
          break;
        case 'window/showMessageRequest':
          result = null;
          break;
        case 'workspace/workspaceFolders':
          result = this.workspaceFolders ?? null;
          break;
        default:
          // e.g. custom/schema/content: we never serve schemas ourselves; every schema
          // must resolve from disk, exactly as in an offline editor.
          error = { code: -32601, message: `gitfleet check client: unhandled request ${msg.method}` };
          this.log(`server asked for unhandled ${msg.method} ${JSON.stringify(msg.params)}`);
      }
      this.send(error ? { jsonrpc: '2.0', id: msg.id, error } : { jsonrpc: '2.0', id: msg.id, result });
      return;
    }
    // A notification from the server.
    if (msg.method === 'window/logMessage' || msg.method === 'window/showMessage') {
      this.log(`server ${msg.method}: ${msg.params?.message}`);
    }
    for (const fn of this.notificationListeners.get(msg.method) ?? []) fn(msg.params);
  }

  send(msg) {
    if (this.exited) return;
    const body = Buffer.from(JSON.stringify(msg), 'utf8');
    this.child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
    this.child.stdin.write(body);
  }

  request(method, params) {
    if (this.exited) {
      return Promise.reject(new Error(`language server already exited; cannot send ${method}`));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method, params) {
    this.send({ jsonrpc: '2.0', method, params });
  }

  on(method, fn) {
    if (!this.notificationListeners.has(method)) this.notificationListeners.set(method, []);
    this.notificationListeners.get(method).push(fn);
  }

  async shutdown(graceMs = 2000) {
    if (this.exited) return;
    try {
      await Promise.race([this.request('shutdown', null), sleep(graceMs)]);
      this.notify('exit', null);
    } catch {
      // ignore: we kill below anyway
    }
    const deadline = Date.now() + graceMs;
    while (!this.exited && Date.now() < deadline) await sleep(20);
    if (!this.exited) this.child.kill('SIGKILL');
  }

  kill() {
    if (!this.exited) this.child.kill('SIGKILL');
  }
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
