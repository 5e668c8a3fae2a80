#!/usr/bin/env node
// Editor check: proves with the real yaml-language-server (the engine of VS Code's
// YAML extension by Red Hat) that gitfleet's committed JSON Schemas work in editors.
//
//   npm ci --prefix tests/editor          # once: installs the pinned server
//   node tests/editor/check.mjs           # run the check (any cwd)
//   node tests/editor/check.mjs --print FILE...   # show what an editor reports for FILEs
//   node tests/editor/check.mjs --allow-missing-modelines   # only warn (instead of failing) when
//                              # a gitfleet document under examples/ or policies/ gets no schema
//
// It starts `yaml-language-server --stdio`, speaks LSP to it like an editor does
// (initialize, initialized, workspace/didChangeConfiguration, answering the
// server's workspace/configuration requests, textDocument/didOpen), collects
// textDocument/publishDiagnostics, and uses textDocument/hover to ask which schema the
// server applies to each YAML document. Nothing is downloaded: the schema store and
// the Kubernetes CRD store are switched off and every schema resolves from schemas/.
//
// What it asserts (exit status 0 when all hold, 1 on any mismatch, 2 on a setup
// problem or the global timeout):
//   * fixtures/valid-fleet.yaml, fixtures/job.yaml: zero diagnostics, and every
//     gitfleet document is validated against the expected schema (hover);
//   * fixtures/invalid-fleet.yaml: exactly the expected diagnostics (line + message
//     fragment), nothing else;
//   * every document of valid-fleet.yaml also validates against its per-kind schema
//     (<kind>.schema.json), so all six committed schemas load and are exercised;
//   * modeline behaviour in multi-document files (fixtures/modeline-*.yaml, see
//     MODELINE_FINDING below) and schema association through the `yaml.schemas`
//     setting (fixtures/no-modeline-settings.yaml);
//   * completion offers the kinds, the Job spec keys and enum values;
//   * every *.yaml / *.yml under examples/ and policies/ (when those directories exist)
//     has zero diagnostics, and each of its `apiVersion: gitfleet/v1` documents is
//     validated against a gitfleet schema (has its own modeline), so that "zero
//     diagnostics" is not merely "no schema applied".
//
// Node built-ins only (plus the server itself).

import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { LspClient, sleep } from './lsp.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const FIXTURES = path.join(HERE, 'fixtures');
const SERVER_PKG = path.join(HERE, 'node_modules', 'yaml-language-server');
const SERVER_BIN = path.join(SERVER_PKG, 'bin', 'yaml-language-server');
const TIMEOUT_MS = Number(process.env.GITFLEET_EDITOR_TIMEOUT_MS) || 60_000;
const QUIET_MS = 750; // diagnostics are final once the server stayed silent this long
const SCANNED_DIRS = ['examples', 'policies'];

const MODELINE_FINDING = `\
modeline in multi-document files (yaml-language-server VERSION):
  A modeline applies to ONE YAML document: the one whose leading comments contain it.
  A single modeline at the top of a file validates only the first document; the other
  documents get no schema at all (no diagnostics, no hover, no completion). Put
      # yaml-language-server: $schema=<relative path>
  before the content of EVERY document: as the first line of the file, on the line(s)
  after each '---' (blank lines in between are fine), or on the separator itself
  ('--- # yaml-language-server: $schema=...'). A modeline after a document's first
  content line is ignored, and one just before '---' belongs to the previous document
  (after its content) and is ignored too. Documents without a modeline (e.g. a
  Kubernetes manifest in the same file) are left alone. Alternatively, associate files
  with a schema in editor settings ("yaml.schemas" in .vscode/settings.json): that
  applies to every document of a matching file.`;

// ---------------------------------------------------------------------------------
// Expectations

// Lines are 1-based, as an editor shows them. `text` must occur on that line of the
// fixture (guards against edits shifting lines); `message` must occur in the message.
const FIXTURE_CASES = [
  {
    file: 'valid-fleet.yaml',
    diagnostics: [],
    // the schema applied to each document, in order (by its top-level `kind:` line)
    documentSchemas: [
      ...Array(9).fill('schemas/fleet.schema.json'),
      null, // the Kubernetes ConfigMap without a modeline
    ],
  },
  {
    file: 'job.yaml',
    diagnostics: [],
    documentSchemas: ['schemas/job.schema.json', 'schemas/job.schema.json'],
  },
  {
    file: 'invalid-fleet.yaml',
    diagnostics: [
      { line: 8, text: 'name: Llama-Finetune', message: 'String does not match the pattern of "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"' },
      { line: 11, text: 'replica: 2', message: 'Property replica is not allowed' },
      { line: 12, text: 'replicas: four', message: 'Incorrect type. Expected "integer"' },
      { line: 14, text: 'timeLimit: 5x', message: 'String does not match the pattern of "^([0-9]+(ms|s|m|h|d))+$"' },
      { line: 18, text: 'kind: Jobs', message: 'Value is not accepted. Valid values: "NodePool", "Queue", "PriorityClass", "Job", "Policy"' },
      { line: 28, text: 'nvlink: mesh', message: 'Value must be "full" | "pairs" | "none"' },
      { line: 36, text: 'weight: 0', message: 'Value is below the minimum of 1' },
      { line: 39, text: 'guaranted: 8', message: 'Property guaranted is not allowed' },
      { line: 46, text: 'rules: []', message: 'Array has too few items. Expected 1 or more' },
      { line: 50, text: 'kind: Queue', message: 'Value must be "Job"' },
      { line: 58, text: 'spec:', message: 'Missing property "gpusPerReplica"' },
    ],
    documentSchemas: [
      'schemas/fleet.schema.json',
      'schemas/fleet.schema.json',
      'schemas/fleet.schema.json',
      'schemas/fleet.schema.json',
      'schemas/fleet.schema.json',
      'schemas/job.schema.json',
      'schemas/fleet.schema.json',
    ],
  },
  {
    // One modeline at the top: only the first document is validated; the error in the
    // second one goes unreported.
    file: 'modeline-top-only.yaml',
    diagnostics: [],
    documentSchemas: ['schemas/fleet.schema.json', null],
  },
  {
    // Same error in six documents; only the documents whose modeline sits before
    // their content are validated.
    file: 'modeline-placement.yaml',
    diagnostics: [
      { line: 8, text: 'replicas: four', message: 'Incorrect type. Expected "integer"' },
      { line: 14, text: 'replicas: four', message: 'Incorrect type. Expected "integer"' },
      { line: 19, text: 'replicas: four', message: 'Incorrect type. Expected "integer"' },
      { line: 27, text: 'replicas: four', message: 'Incorrect type. Expected "integer"' },
    ],
    documentSchemas: [
      'schemas/fleet.schema.json',
      'schemas/fleet.schema.json',
      'schemas/fleet.schema.json',
      'schemas/fleet.schema.json',
      null,
      null,
    ],
  },
  {
    // Associated through the `yaml.schemas` setting (SETTINGS_GLOB): every document.
    file: 'no-modeline-settings.yaml',
    diagnostics: [{ line: 16, text: 'replicas: four', message: 'Incorrect type. Expected "integer"' }],
    documentSchemas: ['schemas/fleet.schema.json', 'schemas/fleet.schema.json'],
  },
];

// `yaml.schemas` as a user would write it in .vscode/settings.json (a path relative to
// the workspace root): only the no-modeline fixture matches.
const SETTINGS_SCHEMA = './schemas/fleet.schema.json';
const SETTINGS_GLOB = '**/tests/editor/fixtures/no-modeline-*.yaml';

// Completion requests on in-memory documents: `|` marks the cursor.
const MODELINE = '# yaml-language-server: $schema=../../../schemas/fleet.schema.json';
const COMPLETION_CASES = [
  {
    name: 'kind values',
    text: `${MODELINE}\napiVersion: gitfleet/v1\nkind: |\n`,
    expect: ['NodePool', 'Queue', 'PriorityClass', 'Job', 'Policy'],
  },
  {
    name: 'Job spec keys',
    text: `${MODELINE}\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  queue: nlp\n  |\n`,
    expect: ['gpusPerReplica', 'replicas', 'priorityClass', 'timeLimit', 'topology', 'gpu', 'command', 'image', 'env'],
  },
  {
    name: 'topology levels',
    text: `${MODELINE}\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  queue: nlp\n  gpusPerReplica: 1\n  topology: {required: |}\n`,
    expect: ['none', 'node', 'rack', 'zone'],
  },
  {
    name: 'NodePool nvlink values',
    text: `${MODELINE}\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  nvlink: |\n`,
    expect: ['full', 'pairs', 'none'],
  },
];

// ---------------------------------------------------------------------------------
// Helpers

const rel = (file) => path.relative(REPO, file).split(path.sep).join('/');
const uriOf = (file) => pathToFileURL(file).href;

function walkYaml(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...walkYaml(full));
    else if (entry.isFile() && /\.ya?ml$/i.test(entry.name)) out.push(full);
  }
  return out.sort();
}

/** Top-level documents of a YAML text, by lines: [{kindLine (0-based) | null, gitfleet}] */
function documentsOf(text) {
  const lines = text.split(/\r?\n/);
  const docs = [];
  let current = { kindLine: null, gitfleet: false, hasContent: false };
  const flush = () => {
    if (current.hasContent) docs.push(current);
    current = { kindLine: null, gitfleet: false, hasContent: false };
  };
  lines.forEach((line, i) => {
    if (/^(---|\.\.\.)(\s|$)/.test(line)) {
      flush();
      return;
    }
    if (/^\s*(#.*)?$/.test(line)) return;
    current.hasContent = true;
    if (/^kind\s*:/.test(line) && current.kindLine === null) current.kindLine = i;
    if (/^apiVersion\s*:\s*["']?gitfleet\/v1["']?\s*(#.*)?$/.test(line)) current.gitfleet = true;
  });
  flush();
  return docs;
}

function fmtDiag(file, d) {
  const msg = d.message.replace(/\s*\n\s*/g, ' ');
  return `${rel(file)}:${d.range.start.line + 1}:${d.range.start.character + 1}: ${msg} [${d.source ?? '?'}]`;
}

/** The repo-relative schema path that a hover's "Source: [..](uri)" names, or null. */
function schemaOfHover(hover) {
  if (!hover) return null;
  const contents = hover.contents;
  const text =
    typeof contents === 'string'
      ? contents
      : Array.isArray(contents)
        ? contents.map((c) => (typeof c === 'string' ? c : c.value)).join('\n')
        : contents?.value ?? '';
  const m = /Source: \[[^\]]*\]\(([^)\s]+)\)/.exec(text);
  if (!m) return text.trim() ? '(hover without a schema source)' : null;
  try {
    const target = fileURLToPath(decodeURI(m[1]));
    return rel(target);
  } catch {
    return m[1];
  }
}

// ---------------------------------------------------------------------------------
// Main

const args = process.argv.slice(2);
const printMode = args[0] === '--print';
const requireModelines = !args.includes('--allow-missing-modelines');
const failures = [];
const warnings = [];
const fail = (msg) => failures.push(msg);
let phase = 'starting';
let client;

const timer = setTimeout(() => {
  console.error(`\neditor check: TIMEOUT after ${TIMEOUT_MS / 1000} s while ${phase}.`);
  if (client?.stderr) console.error(`server stderr:\n${client.stderr}`);
  client?.kill();
  process.exit(2);
}, TIMEOUT_MS);

function setupError(msg) {
  console.error(`editor check: ${msg}`);
  clearTimeout(timer);
  client?.kill();
  process.exit(2);
}

if (!existsSync(SERVER_BIN)) {
  setupError(`yaml-language-server is not installed (${rel(SERVER_BIN)} is missing): run npm ci --prefix tests/editor`);
}
const serverVersion = JSON.parse(readFileSync(path.join(SERVER_PKG, 'package.json'), 'utf8')).version;

// The documents to open: files on disk and in-memory ones.
const opened = new Map(); // uri -> {file, text, role: 'fixture' | 'scan' | 'perkind' | 'print', ...}

if (printMode) {
  const files = args.slice(1).filter((a) => !a.startsWith('--'));
  if (files.length === 0) setupError('--print needs at least one FILE');
  for (const f of files) {
    const file = path.resolve(f);
    if (!existsSync(file)) setupError(`no such file: ${f}`);
    opened.set(uriOf(file), { file, text: readFileSync(file, 'utf8'), role: 'print' });
  }
} else {
  for (const c of FIXTURE_CASES) {
    const file = path.join(FIXTURES, c.file);
    opened.set(uriOf(file), { file, text: readFileSync(file, 'utf8'), role: 'fixture', case: c });
  }
  // Every document of valid-fleet.yaml against its per-kind schema.
  const validText = readFileSync(path.join(FIXTURES, 'valid-fleet.yaml'), 'utf8');
  const chunks = validText.split(/^---[^\S\r\n]*$/m);
  chunks.forEach((chunk, i) => {
    const kind = /^kind:\s*(\w+)/m.exec(chunk)?.[1];
    if (!kind || !chunk.includes('fleet.schema.json')) return;
    const schema = `${kind.toLowerCase()}.schema.json`;
    const text = chunk.replace(/^\s*\n/, '').replaceAll('fleet.schema.json', schema);
    const file = path.join(FIXTURES, `in-memory-perkind-${i + 1}-${kind.toLowerCase()}.yaml`);
    opened.set(uriOf(file), { file, text, role: 'perkind', schema: `schemas/${schema}` });
  });
  // examples/ and policies/, when present.
  for (const dir of SCANNED_DIRS) {
    const abs = path.join(REPO, dir);
    if (!existsSync(abs) || !statSync(abs).isDirectory()) {
      warnings.push(`${dir}/ does not exist (yet): skipped`);
      continue;
    }
    const files = walkYaml(abs);
    if (files.length === 0) warnings.push(`${dir}/ holds no YAML files`);
    for (const file of files) opened.set(uriOf(file), { file, text: readFileSync(file, 'utf8'), role: 'scan' });
  }
}

const yamlSettings = {
  validate: true,
  hover: true,
  completion: true,
  format: { enable: false },
  schemas: printMode ? {} : { [SETTINGS_SCHEMA]: SETTINGS_GLOB },
  schemaStore: { enable: false, url: '' }, // no network: never fetch the SchemaStore catalog
  kubernetesCRDStore: { enable: false, url: '' },
  disableAdditionalProperties: false,
  yamlVersion: '1.2',
  customTags: [],
  maxItemsComputed: 5000,
};

function configurationFor(item) {
  switch (item.section) {
    case 'yaml':
      return yamlSettings;
    case 'http':
      return { proxy: '', proxyStrictSSL: false };
    case 'editor':
      return { tabSize: 2, detectIndentation: false };
    case '[yaml]':
      return { 'editor.tabSize': 2 };
    default:
      return null;
  }
}

const serverLog = [];
client = new LspClient(process.execPath, [SERVER_BIN, '--stdio'], {
  cwd: REPO,
  configuration: configurationFor,
  log: (line) => serverLog.push(line),
});

const published = new Map(); // uri -> {diagnostics, at}
let lastPublishAt = Date.now();
client.on('textDocument/publishDiagnostics', (p) => {
  published.set(p.uri, { diagnostics: p.diagnostics, at: Date.now() });
  lastPublishAt = Date.now();
});

try {
  phase = 'initializing the server';
  const rootUri = uriOf(REPO);
  await client.request('initialize', {
    processId: process.pid,
    clientInfo: { name: 'gitfleet-editor-check' },
    locale: 'en',
    rootUri,
    rootPath: REPO,
    workspaceFolders: [{ uri: rootUri, name: path.basename(REPO) }],
    capabilities: {
      workspace: {
        configuration: true,
        workspaceFolders: true,
        didChangeConfiguration: { dynamicRegistration: true },
      },
      textDocument: {
        synchronization: { dynamicRegistration: false, didSave: true },
        publishDiagnostics: { relatedInformation: true, versionSupport: true },
        hover: { contentFormat: ['markdown', 'plaintext'] },
        completion: { completionItem: { snippetSupport: true, documentationFormat: ['markdown', 'plaintext'] } },
      },
    },
  });
  client.workspaceFolders = [{ uri: rootUri, name: path.basename(REPO) }];
  client.notify('initialized', {});
  client.notify('workspace/didChangeConfiguration', { settings: { yaml: yamlSettings } });

  phase = 'waiting for the server to pull its configuration';
  // One pull after `initialized`, one after didChangeConfiguration.
  while (client.serverRequests.filter((r) => r.method === 'workspace/configuration' && r.params?.items?.some((i) => i.section === 'yaml')).length < 2) {
    if (client.exited) throw new Error(`server exited: ${JSON.stringify(client.exited)}`);
    await sleep(20);
  }
  await sleep(100);

  phase = 'opening documents';
  const completionDocs = [];
  if (!printMode) {
    COMPLETION_CASES.forEach((c, i) => {
      const cursor = c.text.indexOf('|');
      const text = c.text.replace('|', '');
      const before = text.slice(0, cursor).split('\n');
      const file = path.join(FIXTURES, `in-memory-completion-${i + 1}.yaml`);
      completionDocs.push({ ...c, uri: uriOf(file), position: { line: before.length - 1, character: before.at(-1).length } });
      client.notify('textDocument/didOpen', { textDocument: { uri: uriOf(file), languageId: 'yaml', version: 1, text } });
    });
  }
  for (const [uri, doc] of opened) {
    client.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'yaml', version: 1, text: doc.text } });
  }

  phase = `waiting for diagnostics of ${opened.size} documents`;
  for (;;) {
    if (client.exited) throw new Error(`server exited: ${JSON.stringify(client.exited)}`);
    const missing = [...opened.keys()].filter((u) => !published.has(u));
    if (missing.length === 0 && Date.now() - lastPublishAt >= QUIET_MS) break;
    phase = `waiting for diagnostics (${missing.length} of ${opened.size} documents not yet published${missing.length ? `, e.g. ${rel(fileURLToPath(missing[0]))}` : ''})`;
    await sleep(25);
  }

  // Which schema applies to each document: hover on its top-level `kind` key.
  phase = 'hovering';
  async function documentSchemas(uri, text) {
    const result = [];
    for (const d of documentsOf(text)) {
      if (d.kindLine === null) {
        result.push({ ...d, schema: null });
        continue;
      }
      const hover = await client.request('textDocument/hover', {
        textDocument: { uri },
        position: { line: d.kindLine, character: 1 },
      });
      result.push({ ...d, schema: schemaOfHover(hover) });
    }
    return result;
  }

  let diagnosticsSeen = 0;
  let schemaCheckedDocs = 0;
  let filesChecked = 0;

  for (const [uri, doc] of opened) {
    const diags = [...(published.get(uri)?.diagnostics ?? [])].sort(
      (a, b) => a.range.start.line - b.range.start.line || a.range.start.character - b.range.start.character,
    );
    diagnosticsSeen += diags.length;
    const docs = await documentSchemas(uri, doc.text);
    schemaCheckedDocs += docs.filter((d) => d.schema).length;
    filesChecked += 1;
    const where = rel(doc.file);

    if (doc.role === 'print') {
      console.log(`${where}: ${diags.length} diagnostic(s)`);
      for (const d of diags) console.log(`  ${fmtDiag(doc.file, d)}`);
      docs.forEach((d, i) =>
        console.log(`  document ${i + 1}${d.kindLine !== null ? ` (kind at line ${d.kindLine + 1})` : ''}: schema ${d.schema ?? 'none'}`),
      );
      if (diags.length) fail(`${where}: ${diags.length} diagnostic(s)`);
      continue;
    }

    if (doc.role === 'fixture') {
      const c = doc.case;
      const lines = doc.text.split(/\r?\n/);
      const unmatched = new Set(diags);
      for (const e of c.diagnostics) {
        const lineText = lines[e.line - 1] ?? '';
        if (!lineText.includes(e.text)) {
          fail(`${where}:${e.line}: the fixture changed: expected this line to contain ${JSON.stringify(e.text)}, it is ${JSON.stringify(lineText)} (update FIXTURE_CASES in check.mjs)`);
          continue;
        }
        const hit = diags.find((d) => unmatched.has(d) && d.range.start.line === e.line - 1 && d.message.includes(e.message));
        if (hit) unmatched.delete(hit);
        else {
          const onLine = diags.filter((d) => d.range.start.line === e.line - 1).map((d) => JSON.stringify(d.message));
          fail(`${where}:${e.line}: expected a diagnostic containing ${JSON.stringify(e.message)}; got ${onLine.length ? onLine.join(', ') : 'none on this line'}`);
        }
      }
      for (const d of unmatched) fail(`unexpected diagnostic: ${fmtDiag(doc.file, d)}`);
      const got = docs.map((d) => d.schema);
      if (JSON.stringify(got) !== JSON.stringify(c.documentSchemas)) {
        fail(`${where}: schema per document (via hover on each 'kind:') is ${JSON.stringify(got)}, expected ${JSON.stringify(c.documentSchemas)}`);
      }
      const ok = c.diagnostics.length === 0 ? 'no diagnostics' : `${c.diagnostics.length} expected diagnostic(s)`;
      console.log(`checked ${where}: ${ok}; schemas per document: ${got.map((s) => (s ? path.basename(s) : 'none')).join(', ')}`);
      continue;
    }

    if (doc.role === 'perkind') {
      for (const d of diags) fail(`per-kind schema ${doc.schema}: ${fmtDiag(doc.file, d)} (in-memory copy of a valid-fleet.yaml document)`);
      const got = docs.map((d) => d.schema);
      if (got.length !== 1 || got[0] !== doc.schema) {
        fail(`${where} (in memory): expected schema ${doc.schema}, hover says ${JSON.stringify(got)}`);
      }
      continue;
    }

    // role === 'scan': examples/ and policies/
    for (const d of diags) fail(fmtDiag(doc.file, d));
    const unchecked = docs.filter((d) => d.gitfleet && !d.schema);
    for (const d of unchecked) {
      const msg = `${where}:${(d.kindLine ?? 0) + 1}: gitfleet document without a schema in editors (no modeline before this document's content)`;
      if (requireModelines) fail(msg);
      else warnings.push(msg);
    }
    const checked = docs.filter((d) => d.schema).length;
    console.log(`checked ${where}: ${diags.length} diagnostic(s); ${checked} of ${docs.length} document(s) schema-validated`);
  }

  if (!printMode) {
    const perKind = [...opened.values()].filter((d) => d.role === 'perkind').map((d) => path.basename(d.schema));
    console.log(`checked per-kind schemas on the documents of valid-fleet.yaml: ${perKind.join(', ')}`);
    const expectedKinds = ['nodepool', 'queue', 'priorityclass', 'job', 'policy'].map((k) => `${k}.schema.json`);
    for (const s of expectedKinds) if (!perKind.includes(s)) fail(`valid-fleet.yaml has no document for ${s}`);

    phase = 'requesting completions';
    for (const c of completionDocs) {
      let res;
      try {
        res = await client.request('textDocument/completion', { textDocument: { uri: c.uri }, position: c.position });
      } catch (err) {
        fail(`completion (${c.name}): ${err.message}`);
        continue;
      }
      const labels = (Array.isArray(res) ? res : res?.items ?? []).map((i) => i.label);
      const missing = c.expect.filter((l) => !labels.includes(l));
      if (missing.length) fail(`completion (${c.name}): missing ${JSON.stringify(missing)}; offered ${JSON.stringify(labels)}`);
      else console.log(`checked completion (${c.name}): ${c.expect.join(', ')}`);
    }
  }

  phase = 'shutting down';
  await client.shutdown();
  clearTimeout(timer);

  for (const w of warnings) console.log(`note: ${w}`);
  if (serverLog.length && (failures.length || process.env.GITFLEET_EDITOR_VERBOSE)) {
    console.log(`server messages:\n  ${serverLog.join('\n  ')}`);
  }
  if (!printMode) console.log(`\n${MODELINE_FINDING.replace('VERSION', serverVersion)}\n`);
  if (failures.length) {
    console.error(`editor check FAILED (yaml-language-server ${serverVersion}): ${failures.length} problem(s)`);
    for (const f of failures) console.error(`  - ${f}`);
    process.exit(1);
  }
  const inMemory = [...opened.values()].filter((d) => d.role === 'perkind').length;
  console.log(
    `editor check passed (yaml-language-server ${serverVersion}): ${filesChecked} files opened` +
      `${inMemory ? ` (${inMemory} of them in memory)` : ''}, ${schemaCheckedDocs} YAML documents validated ` +
      `against a gitfleet schema, ${diagnosticsSeen} diagnostics, all as expected`,
  );
  process.exit(0);
} catch (err) {
  console.error(`editor check: error while ${phase}: ${err?.stack ?? err}`);
  if (client?.stderr) console.error(`server stderr:\n${client.stderr}`);
  clearTimeout(timer);
  client?.kill();
  process.exit(2);
}
