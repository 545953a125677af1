// The attach command the UI shows: safe to paste, for a run here and on another host.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, chmodSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { attachCommand } from "./dom.js";

/** What tmux gets when `line` is pasted: a real shell, then ssh's join and the host's shell. */
function tmuxArgv(line) {
  const dir = mkdtempSync(join(tmpdir(), "lab-attach-"));
  writeFileSync(join(dir, "ssh"), '#!/bin/sh\nshift 2\nexec sh -c "$*"\n');
  writeFileSync(join(dir, "tmux"), `#!/bin/sh\nprintf '%s\\n' "$@" > '${dir}/argv'\n`);
  chmodSync(join(dir, "ssh"), 0o755);
  chmodSync(join(dir, "tmux"), 0o755);
  execFileSync("sh", ["-c", line], { cwd: dir, env: { PATH: `${dir}:/usr/bin:/bin` } });
  return { argv: readFileSync(join(dir, "argv"), "utf8").split("\n").filter((l) => l), dir };
}

test("a run on a host: the remote command is one quoted word", () => {
  const run = { host: "m1", tmux_socket: "/home/lab/.lab/tmux.sock", tmux_target: "=lab-r-1:" };
  const cmd = attachCommand(run);
  assert.equal(cmd, "ssh -t m1 'tmux -S /home/lab/.lab/tmux.sock attach -t =lab-r-1:'");
  assert.deepEqual(tmuxArgv(cmd).argv, ["-S", "/home/lab/.lab/tmux.sock", "attach", "-t", "=lab-r-1:"]);
});

test("a runner-reported path that is not plain gives no command to paste", () => {
  for (const tmux_socket of ["/x/s d;touch${IFS}/tmp/PWNED;#", "/x/$(id)", "/x/a'b", "/x/\nb"]) {
    assert.equal(attachCommand({ host: "m1", tmux_socket, tmux_target: "=lab-r-1:" }), null, tmux_socket);
  }
  assert.equal(attachCommand({ host: "m 1", tmux_socket: "/s", tmux_target: "=lab-r-1:" }), null);
});

test("a run here: one shell, each word quoted", () => {
  const sock = "/home/o p/.lab/tmux.sock";
  const cmd = attachCommand({ tmux_socket: sock, tmux_target: "=lab-r-1:" });
  assert.equal(cmd, "tmux -S '/home/o p/.lab/tmux.sock' attach -t =lab-r-1:");
  const { argv, dir } = tmuxArgv(cmd);
  assert.deepEqual(argv, ["-S", sock, "attach", "-t", "=lab-r-1:"]);
  assert.ok(!existsSync(join(dir, "PWNED")));
  assert.equal(attachCommand({}), null);
});
