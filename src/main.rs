fn main() {
    // `pacesim --version` names the commit when the build gave it (`just wheel` sets
    // PACESIM_GIT_COMMIT): read here, in the binary, so a new commit recompiles main.rs alone
    if let Some(commit) = option_env!("PACESIM_GIT_COMMIT") {
        pacesim::cli::set_build_commit(commit);
    }
    std::process::exit(pacesim::cli::main_with_backends(Vec::new()));
}
