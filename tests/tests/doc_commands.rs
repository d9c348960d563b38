//! The user docs' commands work as written: every fenced block whose info
//! string says `runnable` (```` ```sh runnable ````, ```` ```python runnable ````)
//! runs, in order, as a new user would paste it into one terminal.
//!
//! Each document runs in a fresh directory with the `rill` and `rill-bench`
//! that Cargo built first on `PATH` (where `cargo install --path .` puts
//! them for a user). A shell block runs in `bash -e`; what it starts with
//! `&` keeps running for the document's later blocks, as it would in a
//! terminal, and the whole document's processes are stopped at its end.
//! A block that fails or runs past its time fails the test with the
//! document, the line and what the block printed.
//!
//! The docs use Kafka's usual ports (9092, 9644, ...) as written, so a
//! document whose ports are taken on this host is skipped, by reason.

use rill_tests::{data_dir, skipped};
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// The documents whose runnable blocks run, and the ports their commands
/// bind as written.
const DOCUMENTS: &[(&str, &[u16])] = &[("README.md", &[9092, 9093, 9644])];

/// No documented command should take longer than this on a 2-core host.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

/// One fenced block marked runnable.
#[derive(Debug, PartialEq)]
struct Block {
    /// `sh`, `bash` or `python`.
    language: String,
    code: String,
    /// The line of the opening fence, 1-based.
    line: usize,
}

/// The fenced blocks of `markdown` whose info string holds the word
/// `runnable`, in document order.
fn runnable_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(Block, bool)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let mut words = info.split_whitespace();
                    let language = words.next().unwrap_or("").to_string();
                    let runnable = words.any(|word| word == "runnable");
                    let block = Block {
                        language,
                        code: String::new(),
                        line: index + 1,
                    };
                    open = Some((block, runnable));
                }
            }
            Some((block, runnable)) if trimmed.starts_with("```") => {
                if runnable {
                    blocks.push(block);
                }
            }
            Some((mut block, runnable)) => {
                block.code.push_str(line);
                block.code.push('\n');
                open = Some((block, runnable));
            }
        }
    }
    blocks
}

/// The command that runs `block`, or `None` for a language no runner knows.
fn block_command(block: &Block) -> Option<Command> {
    let mut command = match block.language.as_str() {
        "sh" | "bash" | "shell" => {
            let mut shell = Command::new("bash");
            shell.arg("-e").arg("-c").arg(&block.code);
            shell
        }
        "python" | "python3" => {
            let mut python = Command::new("python3");
            python.arg("-c").arg(&block.code);
            python
        }
        _ => return None,
    };
    command.stdin(Stdio::null());
    Some(command)
}

/// The processes of one document: a placeholder leader whose process group
/// every block joins, so that what a block leaves running in the background
/// is stopped with the document.
struct Session {
    leader: Child,
    dir: PathBuf,
    path: String,
}

impl Session {
    fn start(dir: &Path) -> Session {
        let leader = Command::new("sleep")
            .arg("3600")
            .process_group(0)
            .spawn()
            .expect("start the session's process group");
        let bin_dir = Path::new(RILL).parent().expect("the binary's dir");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Session {
            leader,
            dir: dir.to_path_buf(),
            path,
        }
    }

    /// Runs `block` to its end: its exit status and everything it printed.
    fn run(&self, mut command: Command) -> (Option<std::process::ExitStatus>, String) {
        let log_path = self.dir.join("block.log");
        let log = std::fs::File::create(&log_path).expect("block log");
        let mut child = command
            .current_dir(&self.dir)
            .env("PATH", &self.path)
            .env("PYTHONUNBUFFERED", "1")
            .stdout(log.try_clone().expect("block log"))
            .stderr(log)
            .process_group(self.leader.id() as i32)
            .spawn()
            .expect("start the block");
        let deadline = Instant::now() + BLOCK_TIMEOUT;
        let status = loop {
            match child.try_wait().expect("wait for the block") {
                Some(status) => break Some(status),
                None if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let mut output = String::new();
        let _ = std::fs::File::open(&log_path).and_then(|mut f| f.read_to_string(&mut output));
        (status, output)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SIGTERM first, so the brokers a document started stop cleanly.
        let group = self.leader.id() as i32;
        unsafe {
            libc::kill(-group, libc::SIGTERM);
        }
        std::thread::sleep(Duration::from_secs(2));
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
        let _ = self.leader.wait();
    }
}

fn port_taken(port: u16) -> bool {
    TcpListener::bind(("0.0.0.0", port)).is_err()
}

/// Runs every runnable block of `document`; the failures, as messages.
fn run_document(document: &str, ports: &[u16]) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(document);
    let markdown = std::fs::read_to_string(&path).expect("read the document");
    let blocks = runnable_blocks(&markdown);
    assert!(!blocks.is_empty(), "{document} has no runnable block");
    if let Some(port) = ports.iter().find(|port| port_taken(**port)) {
        skipped(&format!(
            "port {port} is in use here; {document}'s commands use it as written"
        ));
        return Vec::new();
    }
    let dir = data_dir();
    let session = Session::start(dir.path());
    let mut failures = Vec::new();
    for block in &blocks {
        let Some(command) = block_command(block) else {
            failures.push(format!(
                "{document}:{}: no runner for `{}`",
                block.line, block.language
            ));
            continue;
        };
        let (status, output) = session.run(command);
        let failed = match status {
            Some(status) if status.success() => None,
            Some(status) => Some(format!("exited with {status}")),
            None => Some(format!("ran past {BLOCK_TIMEOUT:?}")),
        };
        eprintln!("{document}:{}: {}\n{output}", block.line, block.language);
        if let Some(why) = failed {
            failures.push(format!(
                "{document}:{} ({}) {why}:\n{}\n--- output ---\n{output}",
                block.line, block.language, block.code
            ));
            // Later blocks build on this one; their failures would only
            // repeat it.
            break;
        }
    }
    failures
}

#[test]
fn the_runnable_blocks_of_the_user_docs_work_as_written() {
    for tool in ["kcat", "curl"] {
        if Command::new(tool).arg("-V").output().is_err() {
            skipped(&format!("{tool} is not installed (CI installs it)"));
            return;
        }
    }
    let python_client = Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .status()
        .is_ok_and(|status| status.success());
    if !python_client {
        skipped("python3's confluent_kafka is not installed (CI installs it)");
        return;
    }
    let failures: Vec<String> = DOCUMENTS
        .iter()
        .flat_map(|(document, ports)| run_document(document, ports))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn runnable_blocks_are_found_with_their_language_and_line() {
    let markdown = "intro\n\n```sh runnable\necho one\necho two\n```\n\n```sh\nnot this\n```\n\n```python runnable\nprint(1)\n```\n";
    let blocks = runnable_blocks(markdown);
    assert_eq!(
        blocks,
        vec![
            Block {
                language: "sh".into(),
                code: "echo one\necho two\n".into(),
                line: 3,
            },
            Block {
                language: "python".into(),
                code: "print(1)\n".into(),
                line: 12,
            },
        ]
    );
}

#[test]
fn a_failing_block_fails_with_its_output() {
    let dir = data_dir();
    let session = Session::start(dir.path());
    let block = Block {
        language: "sh".into(),
        code: "echo before\nfalse\necho after\n".into(),
        line: 1,
    };
    let (status, output) = session.run(block_command(&block).expect("a shell block"));
    assert!(!status.expect("it ended").success());
    assert_eq!(output, "before\n", "bash -e stops at the first failure");
}

#[test]
fn what_a_block_starts_in_the_background_lasts_for_the_next_block() {
    let dir = data_dir();
    let session = Session::start(dir.path());
    let start = Block {
        language: "sh".into(),
        code: "sleep 30 &\necho $! > bg.pid\n".into(),
        line: 1,
    };
    let (status, _) = session.run(block_command(&start).expect("a shell block"));
    assert!(status.expect("it ended").success());
    let check = Block {
        language: "sh".into(),
        code: "kill -0 \"$(cat bg.pid)\"\n".into(),
        line: 2,
    };
    let (status, output) = session.run(block_command(&check).expect("a shell block"));
    assert!(status.expect("it ended").success(), "{output}");
    let pid: i32 = std::fs::read_to_string(dir.path().join("bg.pid"))
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid");
    drop(session);
    // The background job was in the session's group and is gone with it
    // (at most a zombie until its new parent reaps it).
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let alive = state
        .rsplit(") ")
        .next()
        .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('Z'));
    assert!(!alive, "the session's background job outlived it: {state}");
}
