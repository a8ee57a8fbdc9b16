'use strict';
// package.json "main" glob matching (lib/glob.js), on a real directory tree.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { globToRegExp, matchFiles, isGlob } = require('../lib/glob');

test('glob syntax: * and ? stay within a directory, ** spans any depth, {a,b} alternates', () => {
  const m = (g, p) => globToRegExp(g).test(p);
  assert.ok(m('src/functions/*.js', 'src/functions/a.js'));
  assert.ok(!m('src/functions/*.js', 'src/functions/sub/a.js'));
  assert.ok(!m('src/functions/*.js', 'src/functions/a.ts'));
  assert.ok(m('src/**/*.js', 'src/a.js'));
  assert.ok(m('src/**/*.js', 'src/x/y/a.js'));
  assert.ok(!m('src/**/*.js', 'lib/a.js'));
  assert.ok(m('dist/{a,b}/*.{js,mjs}', 'dist/b/f.mjs'));
  assert.ok(!m('dist/{a,b}/*.{js,mjs}', 'dist/c/f.js'));
  assert.ok(m('f?.js', 'f1.js'));
  assert.ok(!m('f?.js', 'f/.js'));
  assert.ok(!m('a.js', 'aXjs'), 'a dot is literal');
  assert.ok(m('**', 'any/thing.js'));
  assert.throws(() => globToRegExp('src/{a,b/*.js'), /unbalanced '\{' in glob 'src\/\{a,b\/\*\.js'/);
  assert.equal(isGlob('src/index.js'), false);
  assert.equal(isGlob('src/*.js'), true);
});

test('matchFiles: sorted absolute paths, node_modules and dot directories skipped, plain paths as is', (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'faast-glob-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  for (const f of ['src/b.js', 'src/a.js', 'src/deep/c.js', 'src/readme.md', 'node_modules/x/src/d.js', 'src/.hidden/e.js', 'index.js']) {
    fs.mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
    fs.writeFileSync(path.join(root, f), '');
  }
  assert.deepEqual(matchFiles(root, 'src/*.js'), ['src/a.js', 'src/b.js'].map((f) => path.join(root, f)));
  assert.deepEqual(matchFiles(root, './src/**/*.js'), ['src/a.js', 'src/b.js', 'src/deep/c.js'].map((f) => path.join(root, f)));
  assert.deepEqual(matchFiles(root, '**/d.js'), []);
  assert.deepEqual(matchFiles(root, 'index.js'), [path.join(root, 'index.js')]);
  assert.deepEqual(matchFiles(root, 'missing.js'), []);
  assert.deepEqual(matchFiles(root, 'src'), [], 'a directory is not a file to load');
});
