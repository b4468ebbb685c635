use clap::Parser;

fn main() {
    let cli = match pacesim::cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                pacesim::cli::EXIT_BAD_INPUT
            } else {
                pacesim::cli::EXIT_PASS
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    // `pacesim run FILE | head`: stop quietly when the reader goes, as a Unix filter does (Rust
    // ignores SIGPIPE, so every print would fail and panic instead). Not for the live commands:
    // they write to their workers' pipes and must clean up whatever happens to a reader.
    use pacesim::cli::Command;
    if !matches!(
        cli.command,
        Command::Live { .. } | Command::Conform { .. } | Command::Worker { .. }
    ) {
        // SAFETY: at start-up, before any other thread exists; restores the default action.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    std::process::exit(pacesim::cli::main_with(cli));
}
