//! The fleet cache as users meet it, on the gl backend (llvmpipe where there is no GPU): the
//! `sparkle` command on "machines" that are separate cache folders sharing one real Redis and
//! one real S3-compatible server. The second machine loads from the remote, compiles nothing and
//! gets correct results; `cache push`, `cache pull` and `cache remote` work; signed entries are
//! accepted only under a trusted key; the driver's own cache travels too. (`sparkle-bench
//! bench-fleet`: the lab's `fleet` tests.)

use std::path::Path;
use std::process::{Command, Output};

use crate::remote_support::{self, Server};

impl Server {
    /// The variables a user sets to reach this remote, with a lookup budget far above what a
    /// loaded machine could take, so that hits do not depend on timing.
    fn env(&self, prefix: &str) -> Vec<(String, String)> {
        let mut env = self.plain_env(prefix);
        env.push(("SPARKLE_CACHE_REMOTE_BUDGET_MS".into(), "20000".into()));
        env
    }

    fn plain_env(&self, prefix: &str) -> Vec<(String, String)> {
        match self {
            Server::Redis(server) => vec![("SPARKLE_CACHE_REMOTE".into(), server.url())],
            Server::S3(server) => {
                let mut env: Vec<(String, String)> =
                    server.client_env().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                env.push(("SPARKLE_CACHE_REMOTE".into(), server.url(prefix)));
                env.push(("SPARKLE_CACHE_S3_ENDPOINT".into(), server.endpoint()));
                env
            }
        }
    }
}

/// Runs `sparkle args` on the gl backend with its cache in `cache` and `env` set.
fn sparkle(args: &[&str], cache: &Path, env: &[(String, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .args(args)
        .env("SPARKLE_CACHE_DIR", cache)
        .env("SPARKLE_BACKEND", "gl")
        .env("SPARKLE_LOG", "info")
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("the sparkle binary runs")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Runs and expects success; returns the output's text.
fn ok(args: &[&str], cache: &Path, env: &[(String, String)]) -> String {
    let output = sparkle(args, cache, env);
    let text = text(&output);
    assert!(output.status.success(), "sparkle {args:?} failed:\n{text}");
    text
}

#[test]
fn a_second_machine_runs_from_the_remote_and_is_correct() {
    for (index, server) in Server::both().into_iter().enumerate() {
        let env = server.env(&format!("second-{index}"));
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for kernel in ["saxpy", "sgemm", "conv2d"] {
            let first = ok(&["run", kernel], a.path(), &env);
            assert!(first.contains("(compiled)") && first.contains("result: correct"), "{first}");
        }
        for kernel in ["saxpy", "sgemm", "conv2d"] {
            let second = ok(&["run", kernel], b.path(), &env);
            assert!(
                second.contains("(loaded from the remote cache)"),
                "machine B compiled {kernel}:\n{second}"
            );
            assert!(second.contains("result: correct"), "{second}");
        }
        // B's first process took the driver's cache from the remote too.
        let first_b = ok(&["run", "saxpy"], tempfile::tempdir().unwrap().path(), &env);
        assert!(first_b.contains("driver cache fetched from the remote cache"), "{first_b}");
        // `cache stats` (no GPU, no remote opened) reports what the fleet tier did on B.
        let output = sparkle(&["cache", "stats", "--json"], b.path(), &[]);
        assert!(output.status.success(), "{}", text(&output));
        let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let remote =
            stats.as_object().unwrap().values().find_map(|gpu| gpu.get("remote")).expect("a remote ledger");
        assert_eq!((remote["processes"].as_u64(), remote["hits"].as_u64()), (Some(3), Some(3)), "{stats}");
        let table = ok(&["cache", "stats"], b.path(), &[]);
        assert!(table.contains("Fleet cache, as processes on this machine used it"), "{table}");
        // And B keeps what it fetched: without the remote it loads from its own disk.
        let local = ok(&["run", "sgemm"], b.path(), &[]);
        assert!(local.contains("(loaded from the disk cache)"), "{local}");
    }
}

#[test]
fn push_pull_and_status_from_the_command_line() {
    for (index, server) in Server::both().into_iter().enumerate() {
        let env = server.env(&format!("push-{index}"));
        let (c, d) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // C compiled before it knew the remote; it pushes afterwards.
        ok(&["run", "saxpy"], c.path(), &[]);
        ok(&["run", "conv2d"], c.path(), &[]);
        let status = ok(&["cache", "remote"], c.path(), &env);
        assert!(status.contains("Reachable: yes") && status.contains("Entries for this GPU: 0"), "{status}");
        let pushed = ok(&["cache", "push"], c.path(), &env);
        assert!(pushed.contains("offered 2 verified local entries: 2 published"), "{pushed}");
        let output = sparkle(&["cache", "remote", "--json"], c.path(), &env);
        assert!(output.status.success(), "{}", text(&output));
        let status = String::from_utf8_lossy(&output.stdout);
        let json: serde_json::Value = serde_json::from_str(&status).unwrap();
        assert_eq!(json["remote"]["entries"], 2, "{status}");

        let pulled = ok(&["cache", "pull", "--working-set"], d.path(), &env);
        assert!(pulled.contains("pulled 2 of 2 entries"), "{pulled}");
        let run = ok(&["run", "conv2d"], d.path(), &[]);
        assert!(run.contains("(loaded from the disk cache)") && run.contains("result: correct"), "{run}");
        let again = ok(&["cache", "pull"], d.path(), &env);
        assert!(again.contains("2 already here"), "{again}");
    }
}

#[test]
fn only_trusted_signatures_are_loaded() {
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let keys = tempfile::tempdir().unwrap();
    let (ours, theirs) = (keys.path().join("ours.key"), keys.path().join("theirs.key"));
    let public = |key: &Path| {
        let output = sparkle(&["cache", "keygen", key.to_str().unwrap()], keys.path(), &[]);
        assert!(output.status.success(), "{}", text(&output));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    };
    let (our_public, _) = (public(&ours), public(&theirs));
    assert_eq!(our_public.len(), 64);
    let remote = ("SPARKLE_CACHE_REMOTE".to_owned(), redis.url());
    let budget = ("SPARKLE_CACHE_REMOTE_BUDGET_MS".to_owned(), "20000".to_owned());
    let signed_by = |key: &Path| {
        vec![remote.clone(), budget.clone(), ("SPARKLE_CACHE_SIGNING_KEY".into(), key.display().to_string())]
    };
    let trusting =
        vec![remote.clone(), budget.clone(), ("SPARKLE_CACHE_TRUSTED_KEYS".into(), our_public.clone())];

    // Signed by a key nobody trusts: refused, compiled, said once with the reason.
    ok(&["run", "saxpy"], tempfile::tempdir().unwrap().path(), &signed_by(&theirs));
    let refused = ok(&["run", "saxpy"], tempfile::tempdir().unwrap().path(), &trusting);
    assert!(refused.contains("(compiled)") && refused.contains("not a trusted key"), "{refused}");

    // Signed by ours: loaded.
    ok(&["run", "sgemm"], tempfile::tempdir().unwrap().path(), &signed_by(&ours));
    let accepted = ok(&["run", "sgemm"], tempfile::tempdir().unwrap().path(), &trusting);
    assert!(accepted.contains("(loaded from the remote cache)"), "{accepted}");
}

#[test]
fn a_bad_remote_setting_is_a_clear_error_and_a_dead_remote_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let bad = sparkle(&["run", "saxpy"], dir.path(), &[("SPARKLE_CACHE_REMOTE".into(), "ftp://x".into())]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("SPARKLE_CACHE_REMOTE") && text(&bad).contains("s3://"), "{}", text(&bad));
    let port = remote_support::free_local_port().unwrap();
    let dead = vec![("SPARKLE_CACHE_REMOTE".to_owned(), format!("redis://127.0.0.1:{port}/0"))];
    let run = ok(&["run", "saxpy"], dir.path(), &dead);
    assert!(run.contains("result: correct"), "{run}");
}
