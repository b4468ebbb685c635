fn main() {
    // `pacesim ... | head -1`: printing to a closed pipe ends the program quietly, exit 0 (Rust
    // ignores SIGPIPE and `println!` panics on EPIPE; everything a command cleans up is done
    // before it prints its results)
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default_hook(info);
    }));
    // `pacesim --version` names the commit when the build gave it (`just wheel` sets
    // PACESIM_GIT_COMMIT): read here, in the binary, so a new commit recompiles main.rs alone
    if let Some(commit) = option_env!("PACESIM_GIT_COMMIT") {
        pacesim::cli::set_build_commit(commit);
    }
    std::process::exit(pacesim::cli::main_with_backends(Vec::new()));
}
