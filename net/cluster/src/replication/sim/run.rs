//! The entry points: run a seeded [`World`] step by step, auditing after
//! each, until the steps run out or a rule breaks.

use super::config::SimConfig;
use super::report::{SimStats, Violation};
use super::world::World;

/// Runs `steps` steps of the default simulation from `seed`.
pub fn simulate(seed: u64, steps: u64) -> Result<SimStats, Violation> {
    simulate_with(&SimConfig::default(), seed, steps)
}

/// Runs `steps` steps of the simulation with `config` from `seed`.
pub fn simulate_with(config: &SimConfig, seed: u64, steps: u64) -> Result<SimStats, Violation> {
    let mut world = World::new(*config, seed);
    for step in 0..steps {
        let outcome = world.step().and_then(|()| world.audit());
        if let Err((rule, detail)) = outcome {
            return Err(Violation {
                seed,
                step,
                rule,
                detail,
            });
        }
        world.count_step();
    }
    Ok(world.final_stats())
}
