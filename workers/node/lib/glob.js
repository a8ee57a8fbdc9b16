'use strict';
// package.json "main" globs for Node v4 apps: `*`, `?`, `**` and `{a,b}`, matched against paths
// relative to the app directory with `/` separators. Small enough not to need a dependency.
const fs = require('fs');
const path = require('path');

const GLOB_CHARS = /[*?{}]/;

function isGlob(pattern) {
  return GLOB_CHARS.test(pattern);
}

// Glob -> RegExp. `**/` matches zero or more whole directories, `*` and `?` never cross `/`.
function globToRegExp(pattern) {
  let re = '';
  let braces = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        const slash = pattern[i + 2] === '/';
        re += slash ? '(?:.*/)?' : '.*';
        i += slash ? 2 : 1;
      } else {
        re += '[^/]*';
      }
    } else if (c === '?') {
      re += '[^/]';
    } else if (c === '{') {
      braces++;
      re += '(?:';
    } else if (c === '}' && braces > 0) {
      braces--;
      re += ')';
    } else if (c === ',' && braces > 0) {
      re += '|';
    } else {
      re += c.replace(/[.+^$()|[\]\\}]/g, '\\$&');
    }
  }
  if (braces > 0) throw new Error(`unbalanced '{' in glob '${pattern}'`);
  return new RegExp(`^${re}$`);
}

// Every file under `root` (relative, `/`-separated), skipping node_modules and dot directories: an
// app's dependencies are never its entry points, and walking them would cost seconds.
function listFiles(root) {
  const out = [];
  const walk = (rel) => {
    let entries;
    try { entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true }); } catch { return; }
    for (const e of entries) {
      const child = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
        walk(child);
      } else if (e.isFile()) {
        out.push(child);
      }
    }
  };
  walk('');
  return out;
}

// Absolute paths of the files `pattern` names in `root`, sorted (a stable registration order).
function matchFiles(root, pattern) {
  const normalized = pattern.replace(/\\/g, '/').replace(/^\.\//, '');
  if (!isGlob(normalized)) {
    const file = path.resolve(root, normalized);
    return fs.existsSync(file) && fs.statSync(file).isFile() ? [file] : [];
  }
  const re = globToRegExp(normalized);
  return listFiles(root).filter((f) => re.test(f)).sort().map((f) => path.join(root, f));
}

module.exports = { isGlob, globToRegExp, matchFiles };
