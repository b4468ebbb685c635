fn main() {
    std::process::exit(pacesim::cli::main_with_backends(Vec::new()));
}
