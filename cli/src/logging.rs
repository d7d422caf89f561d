//! The log set-up of the command and the benchmark package: `tracing` events to stderr, filtered
//! by `SPARKLE_LOG` (else `RUST_LOG`, else warnings only), coloured only on a terminal.

/// Installs the log subscriber; call once, first thing in `main`.
pub fn init_logging() {
    let sparkle_log = std::env::var("SPARKLE_LOG").ok();
    let rust_log = std::env::var("RUST_LOG").ok();
    let (filter, complaint) = choose_log_filter(sparkle_log.as_deref(), rust_log.as_deref());
    if let Some(complaint) = complaint {
        eprintln!("{complaint}");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours_wanted(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR"),
        ))
        .init();
}

/// Colours in the log only on a terminal, and not when `NO_COLOR` is set to anything
/// (no-color.org): a piped or logged stderr must not carry escape codes.
fn colours_wanted(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// What is logged when nothing (or nothing usable) says otherwise: warnings never go unseen.
const DEFAULT_LOG_FILTER: &str = "warn";

/// The log filter from `SPARKLE_LOG`, else `RUST_LOG` (empty counts as unset), else `warn`. An
/// unparsable value is replaced by `warn`, with the one line to show the user saying why.
fn choose_log_filter(sparkle_log: Option<&str>, rust_log: Option<&str>) -> (String, Option<String>) {
    let chosen = [("SPARKLE_LOG", sparkle_log), ("RUST_LOG", rust_log)]
        .into_iter()
        .find_map(|(name, value)| Some((name, value?.trim())).filter(|(_, v)| !v.is_empty()));
    let Some((name, value)) = chosen else { return (DEFAULT_LOG_FILTER.to_owned(), None) };
    match tracing_subscriber::EnvFilter::try_new(value) {
        Ok(_) => (value.to_owned(), None),
        Err(err) => (
            DEFAULT_LOG_FILTER.to_owned(),
            Some(format!(
                "sparkle: {name}={value:?} is not a valid log filter ({err}); logging warnings and errors \
                 only. For example SPARKLE_LOG=sparkle=debug"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{choose_log_filter, colours_wanted};

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours_wanted(true, None));
        assert!(!colours_wanted(false, None));
        assert!(!colours_wanted(true, Some("1".into())));
        assert!(colours_wanted(true, Some("".into())), "an empty NO_COLOR counts as unset");
    }

    #[test]
    fn unset_or_empty_means_warn() {
        assert_eq!(choose_log_filter(None, None), ("warn".to_owned(), None));
        assert_eq!(choose_log_filter(Some(""), None), ("warn".to_owned(), None));
        assert_eq!(choose_log_filter(Some("  "), Some("")), ("warn".to_owned(), None));
    }

    #[test]
    fn sparkle_log_wins_over_rust_log() {
        assert_eq!(choose_log_filter(Some("sparkle=debug"), Some("info")).0, "sparkle=debug");
        assert_eq!(choose_log_filter(None, Some("info")).0, "info");
        assert_eq!(choose_log_filter(Some(""), Some("info")).0, "info", "empty counts as unset");
    }

    #[test]
    fn an_unparsable_filter_falls_back_to_warn_and_says_why() {
        for bad in ["sparkle=loud", "[unclosed"] {
            let (filter, complaint) = choose_log_filter(Some(bad), Some("debug"));
            assert_eq!(filter, "warn", "{bad}");
            let complaint = complaint.unwrap_or_else(|| panic!("no complaint for {bad:?}"));
            assert!(complaint.contains("SPARKLE_LOG") && complaint.contains(bad), "{complaint}");
            assert!(complaint.contains("SPARKLE_LOG=sparkle=debug"), "{complaint}");
            assert_eq!(complaint.lines().count(), 1, "{complaint}");
        }
        let (filter, complaint) = choose_log_filter(None, Some("sparkle=loud"));
        assert_eq!(filter, "warn");
        assert!(complaint.is_some_and(|c| c.contains("RUST_LOG")));
    }
}
