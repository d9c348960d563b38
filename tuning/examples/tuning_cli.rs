//! Stand-alone `rill tune` / `rill iotune`, for trying the crate without the
//! broker binary: `cargo run -p rill-tuning --example tuning_cli -- tune check`.

use clap::{Parser, Subcommand};
use tuning::cli::{run_iotune, run_tune, IotuneArgs, TuneArgs};

#[derive(Parser, Debug)]
struct Arguments {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Host checks and tuning.
    Tune(TuneArgs),
    /// Disk measurement.
    Iotune(IotuneArgs),
}

fn main() {
    let code = match Arguments::parse().command {
        Command::Tune(args) => run_tune(args),
        Command::Iotune(args) => run_iotune(args),
    };
    std::process::exit(code);
}
