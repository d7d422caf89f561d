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
    /// loaded machine could take, so that hits do not depend on timing, and unsigned objects
    /// accepted (the signing tests set keys instead).
    fn env(&self, prefix: &str) -> Vec<(String, String)> {
        let mut env = self.plain_env(prefix);
        env.push(("SPARKLE_CACHE_REMOTE_BUDGET_MS".into(), "20000".into()));
        env.push(("SPARKLE_CACHE_REMOTE_UNSIGNED".into(), "1".into()));
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

/// Runs `sparkle args` on the gl backend with its cache in `cache` and `env` set. The driver's
/// cache is the process's own, in `cache`: the fleet tier carries it.
fn sparkle(args: &[&str], cache: &Path, env: &[(String, String)]) -> Output {
    crate::shared_driver_cache::own_driver_cache(&mut Command::new(env!("CARGO_BIN_EXE_sparkle")))
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
        let first_b = ok(&["run", "saxpy", "4096"], tempfile::tempdir().unwrap().path(), &env);
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
        let local = ok(&["run", "sgemm", "64"], b.path(), &[]);
        assert!(local.contains("(loaded from the disk cache)"), "{local}");
    }
}

#[test]
fn push_pull_and_status_from_the_command_line() {
    for (index, server) in Server::both().into_iter().enumerate() {
        let env = server.env(&format!("push-{index}"));
        let (c, d) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // C compiled before it knew the remote; it pushes afterwards.
        ok(&["run", "saxpy", "4096"], c.path(), &[]);
        ok(&["run", "conv2d", "1", "4", "16", "16", "8"], c.path(), &[]);
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
        let run = ok(&["run", "conv2d", "1", "4", "16", "16", "8"], d.path(), &[]);
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
    ok(&["run", "saxpy", "4096"], tempfile::tempdir().unwrap().path(), &signed_by(&theirs));
    let refused = ok(&["run", "saxpy", "4096"], tempfile::tempdir().unwrap().path(), &trusting);
    assert!(refused.contains("(compiled)") && refused.contains("not a trusted key"), "{refused}");

    // Signed by ours: loaded.
    ok(&["run", "sgemm", "64"], tempfile::tempdir().unwrap().path(), &signed_by(&ours));
    let accepted = ok(&["run", "sgemm", "64"], tempfile::tempdir().unwrap().path(), &trusting);
    assert!(accepted.contains("(loaded from the remote cache)"), "{accepted}");
}

#[test]
fn a_remote_that_cannot_be_configured_never_stops_a_program_and_info_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = remote_support::free_local_port().unwrap();
    let redis = format!("redis://127.0.0.1:{port}/0");
    let var = |name: &str, value: &str| (name.to_owned(), value.to_owned());
    // Each: the variables, and what the one message must say (an example of its own scheme).
    let cases = [
        (vec![var("SPARKLE_CACHE_REMOTE", "ftp://x")], "s3://my-bucket"),
        (vec![var("SPARKLE_CACHE_REMOTE", "redis://")], "redis://cache.example.com"),
        (vec![var("SPARKLE_CACHE_REMOTE", "file://relative")], "file:///srv"),
        (vec![var("SPARKLE_CACHE_REMOTE", &redis), var("SPARKLE_CACHE_REMOTE_BUDGET_MS", "0")], "at least 1"),
        (
            vec![var("SPARKLE_CACHE_REMOTE", &redis), var("SPARKLE_CACHE_REMOTE_READ_ONLY", "on")],
            "READ_ONLY=1",
        ),
        (vec![var("SPARKLE_CACHE_REMOTE", &redis), var("SPARKLE_CACHE_TRUSTED_KEYS", "abc")], "64 hex"),
        (
            vec![var("SPARKLE_CACHE_REMOTE", "s3://b/p"), var("SPARKLE_CACHE_S3_ENDPOINT", "garbage")],
            "http://127.0.0.1:9000",
        ),
        (vec![var("SPARKLE_CACHE_REMOTE", &redis)], "SPARKLE_CACHE_REMOTE_UNSIGNED=1"),
        (
            vec![
                var("SPARKLE_CACHE_REMOTE", &redis),
                var("SPARKLE_CACHE_SIGNING_KEY", &dir.path().join("missing.key").display().to_string()),
            ],
            "SPARKLE_CACHE_SIGNING_KEY",
        ),
    ];
    for (env, expected) in &cases {
        let run = sparkle(&["run", "saxpy", "1000"], dir.path(), env);
        let run_text = text(&run);
        assert!(run.status.success(), "{env:?}: the program stopped:\n{run_text}");
        assert!(
            run_text.contains("result: correct") && !run_text.contains("panicked"),
            "{env:?}: {run_text}"
        );
        let said: Vec<_> = run_text.lines().filter(|l| l.contains("WARN") && l.contains(expected)).collect();
        assert_eq!(said.len(), 1, "{env:?}: said once, with {expected:?}:\n{run_text}");
        let info = sparkle(&["info"], dir.path(), env);
        assert_eq!(info.status.code(), Some(1), "{env:?}: info exits 1:\n{}", text(&info));
        assert!(String::from_utf8_lossy(&info.stdout).contains("Remote cache: not used"), "{}", text(&info));
    }
    // A remote that is configured right but dead costs compiles, and says so only when needed:
    // a warm run that finds everything locally is silent about it.
    let dead = vec![var("SPARKLE_CACHE_REMOTE", &redis), var("SPARKLE_CACHE_REMOTE_UNSIGNED", "1")];
    let fresh = tempfile::tempdir().unwrap();
    let cold = ok(&["run", "saxpy", "4096"], fresh.path(), &dead);
    assert!(cold.contains("result: correct") && cold.contains("skipped"), "{cold}");
    let warm = ok(&["run", "saxpy", "4096"], fresh.path(), &dead);
    assert!(!warm.contains("WARN"), "a warm run warns again:\n{warm}");
}

#[test]
fn a_password_in_the_remote_url_is_never_printed() {
    const SECRET: &str = "s3cr3t-fleet-password";
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let port = redis.port();
    // The server takes any password (it has none): the URL still holds one, in both forms.
    for url in
        [format!("redis://:{SECRET}@127.0.0.1:{port}/0"), format!("redis://default:{SECRET}@127.0.0.1:1/0")]
    {
        let env = vec![
            ("SPARKLE_CACHE_REMOTE".to_owned(), url.clone()),
            ("SPARKLE_CACHE_REMOTE_UNSIGNED".to_owned(), "1".to_owned()),
            ("SPARKLE_LOG".to_owned(), "debug".to_owned()),
        ];
        let bad_key = vec![
            env[0].clone(),
            ("SPARKLE_CACHE_SIGNING_KEY".into(), keys.path().join("none").display().to_string()),
        ];
        let bad_url = vec![("SPARKLE_CACHE_REMOTE".to_owned(), format!("redis://:{SECRET}@"))];
        let mut outputs = Vec::new();
        for args in [
            &["run", "saxpy", "1000"][..],
            &["run", "saxpy", "1000"],
            &["info"],
            &["info", "--json"],
            &["cache", "remote"],
            &["cache", "remote", "--json"],
            &["cache", "remote", "verify"],
            &["cache", "remote", "verify", "--json"],
            &["cache", "push"],
            &["cache", "pull"],
            &["cache", "stats"],
            &["cache", "stats", "--json"],
        ] {
            outputs.push((args.join(" "), text(&sparkle(args, dir.path(), &env))));
            outputs
                .push((format!("{} (bad key)", args.join(" ")), text(&sparkle(args, dir.path(), &bad_key))));
            outputs
                .push((format!("{} (bad url)", args.join(" ")), text(&sparkle(args, dir.path(), &bad_url))));
        }
        assert!(
            outputs.iter().any(|(_, out)| out.contains(":***@")),
            "the remote is shown, redacted: {outputs:#?}"
        );
        for (command, out) in &outputs {
            assert!(!out.contains(SECRET), "`sparkle {command}` printed the password:\n{out}");
        }
    }
}

#[test]
fn every_command_ends_quietly_on_a_closed_stdout() {
    use std::process::Stdio;
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let env = Server::Redis(redis).env("pipe");
    ok(&["run", "saxpy", "1000"], dir.path(), &env);
    let key = keys.path().join("k").display().to_string();
    for args in [
        &["--help"][..],
        &["--version"],
        &["info"],
        &["info", "--json"],
        &["run", "saxpy", "1000"],
        &["cache", "stats"],
        &["cache", "stats", "--json"],
        &["cache", "list"],
        &["cache", "list", "--json"],
        &["cache", "verify"],
        &["cache", "remote"],
        &["cache", "remote", "--json"],
        &["cache", "remote", "verify"],
        &["cache", "pull"],
        &["cache", "push"],
        &["cache", "keygen", &key],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sparkle"))
            .args(args)
            .env("SPARKLE_CACHE_DIR", dir.path())
            .env("SPARKLE_BACKEND", "gl")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before the command writes a byte.
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("panicked") && output.status.code() != Some(101),
            "sparkle {args:?}: {:?}\n{stderr}",
            output.status
        );
    }
}

#[test]
fn the_standard_aws_endpoint_variable_reaches_an_http_server() {
    let Some(s3) = remote_support::s3_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    // The usual AWS variables alone (AWS_ENDPOINT_URL=http://…), with and without AWS_ALLOW_HTTP.
    let mut env: Vec<(String, String)> =
        s3.client_env().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    env.push(("SPARKLE_CACHE_REMOTE".into(), s3.url("aws-env")));
    env.push(("SPARKLE_CACHE_REMOTE_UNSIGNED".into(), "1".into()));
    let status = ok(&["cache", "remote"], dir.path(), &env);
    assert!(status.contains("Reachable: yes") && status.contains("Writable: yes"), "{status}");
    env.retain(|(k, _)| k != "AWS_ALLOW_HTTP");
    let status = ok(&["cache", "remote"], dir.path(), &env);
    assert!(status.contains("Reachable: yes"), "{status}");
    // A bucket that does not exist is said at once.
    env.retain(|(k, _)| k != "SPARKLE_CACHE_REMOTE");
    env.push(("SPARKLE_CACHE_REMOTE".into(), "s3://no-such-bucket/x".into()));
    let missing = sparkle(&["cache", "remote"], dir.path(), &env);
    assert_eq!(missing.status.code(), Some(1), "{}", text(&missing));
    assert!(
        text(&missing).contains("no-such-bucket") && text(&missing).contains("does not exist"),
        "{}",
        text(&missing)
    );
    // An endpoint that is not a URL is named, and nothing panics.
    env.retain(|(k, _)| k != "AWS_ENDPOINT_URL");
    env.push(("AWS_ENDPOINT_URL".into(), "garbage".into()));
    let bad = sparkle(&["run", "saxpy", "1000"], dir.path(), &env);
    assert!(bad.status.success() && !text(&bad).contains("panicked"), "{}", text(&bad));
    assert!(text(&bad).contains("S3 endpoint `garbage`"), "{}", text(&bad));
}

#[test]
fn pull_fails_on_refusals_and_push_says_why_a_reader_does_not_publish() {
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let server = Server::Redis(redis);
    let env = server.env("refusals");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    ok(&["run", "saxpy", "1000"], a.path(), &env);
    // Every object on the remote now is damaged.
    let Server::Redis(redis) = &server else { unreachable!() };
    for key in redis.keys("sparkle:*").unwrap() {
        if !key.ends_with(b".lease") && !key.starts_with(b"sparkle:.") {
            redis.set(&key, b"damaged").unwrap();
        }
    }
    let pulled = sparkle(&["cache", "pull"], b.path(), &env);
    assert_eq!(pulled.status.code(), Some(1), "{}", text(&pulled));
    assert!(text(&pulled).contains("1 refused"), "{}", text(&pulled));
    let mut read_only = env.clone();
    read_only.push(("SPARKLE_CACHE_REMOTE_READ_ONLY".into(), "1".into()));
    let pushed = sparkle(&["cache", "push"], a.path(), &read_only);
    assert_eq!(pushed.status.code(), Some(1));
    assert!(
        text(&pushed).contains("only reads the remote cache")
            && !text(&pushed).contains("no remote cache is configured"),
        "{}",
        text(&pushed)
    );
    // verify lists it, --fix puts this machine's entry back.
    let verify = sparkle(&["cache", "remote", "verify"], a.path(), &env);
    assert_eq!(verify.status.code(), Some(1), "{}", text(&verify));
    assert!(text(&verify).contains("refused") && text(&verify).contains("truncated"), "{}", text(&verify));
    ok(&["cache", "remote", "verify", "--fix"], a.path(), &env);
    ok(&["cache", "remote", "verify"], a.path(), &env);
}

#[test]
fn a_signed_fleet_refuses_an_altered_driver_archive() {
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("builder.key");
    let output = sparkle(&["cache", "keygen", key.to_str().unwrap()], keys.path(), &[]);
    let public = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let remote = ("SPARKLE_CACHE_REMOTE".to_owned(), redis.url());
    let budget = ("SPARKLE_CACHE_REMOTE_BUDGET_MS".to_owned(), "20000".to_owned());
    let builder =
        vec![remote.clone(), budget.clone(), ("SPARKLE_CACHE_SIGNING_KEY".into(), key.display().to_string())];
    let reader = vec![remote, budget, ("SPARKLE_CACHE_TRUSTED_KEYS".into(), public)];
    ok(&["run", "saxpy", "4096"], tempfile::tempdir().unwrap().path(), &builder);
    let first = ok(&["run", "saxpy", "4096"], tempfile::tempdir().unwrap().path(), &reader);
    assert!(first.contains("driver cache fetched from the remote cache"), "{first}");
    // One byte of the archive changed (a file of the driver's cache swapped, say).
    let archive = redis.keys("sparkle:*/driver-gl.tar.gz").unwrap().pop().expect("the archive was published");
    let mut bytes = redis.get(&archive).unwrap().unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20;
    redis.set(&archive, &bytes).unwrap();
    let refused = ok(&["run", "saxpy", "4096"], tempfile::tempdir().unwrap().path(), &reader);
    assert!(
        !refused.contains("driver cache fetched")
            && refused.contains("driver cache from the remote cache is not used"),
        "{refused}"
    );
    assert!(
        refused.contains("does not match its contents") && refused.contains("result: correct"),
        "{refused}"
    );
}

/// Re-seals the entry file `from` under the key of the entry file `to`, every checksum right:
/// what anyone who can write a store (or the disk) can do.
fn reseal(from: &Path, to: &Path) {
    use sparkle::cache::{CacheKey, EntryHeader, Expect, HEADER_LEN};
    let bytes = std::fs::read(from).unwrap();
    let header: [u8; HEADER_LEN] = bytes[..HEADER_LEN].try_into().unwrap();
    let header = EntryHeader::parse(&header, bytes.len() as u64).unwrap();
    let key = CacheKey::from_hex(to.file_name().unwrap().to_str().unwrap()).unwrap();
    let expect = Expect { backend: header.backend, gpu_hash: header.gpu_hash, key };
    let payload = &bytes[HEADER_LEN..];
    let mut out =
        EntryHeader::new(expect, header.blob_format, payload, header.compile_time_ns, header.created_ns)
            .to_bytes()
            .to_vec();
    out.extend_from_slice(payload);
    std::fs::write(to, out).unwrap();
}

#[test]
fn a_program_of_another_interface_under_a_key_is_compiled_not_a_failed_run() {
    let dir = tempfile::tempdir().unwrap();
    ok(&["run", "saxpy", "1000"], dir.path(), &[]);
    let saxpy = crate::faults::entry_files(dir.path());
    assert_eq!(saxpy.len(), 1);
    ok(&["run", "sgemm", "64"], dir.path(), &[]);
    let sgemm: Vec<_> =
        crate::faults::entry_files(dir.path()).into_iter().filter(|f| !saxpy.contains(f)).collect();
    assert_eq!(sgemm.len(), 1);
    // saxpy's program re-sealed under sgemm's key, on the disk (the remote tier takes the same
    // path; tests/fleet/adversary.rs puts it there).
    reseal(&saxpy[0], &sgemm[0]);
    let run = ok(&["run", "sgemm", "64"], dir.path(), &[]);
    assert!(run.contains("(compiled)") && run.contains("result: correct"), "{run}");
    assert!(run.contains("does not match the kernel asked for") && run.contains("binding"), "{run}");
    // The entry was replaced: the next run loads sgemm from the disk, silently.
    let again = ok(&["run", "sgemm", "64"], dir.path(), &[]);
    assert!(again.contains("(loaded from the disk cache)") && !again.contains("WARN"), "{again}");
}
