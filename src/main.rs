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
    std::process::exit(pacesim::cli::main_with(cli));
}
