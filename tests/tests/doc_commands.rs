//! The user docs' commands work as written: every fenced block whose info
//! string says `runnable` (```` ```sh runnable ````, ```` ```python runnable ````)
//! runs, in order, as a new user would paste it into one terminal.
//!
//! Each document runs in a fresh directory with the `rill` and `rill-bench`
//! that Cargo built first on `PATH` (where `cargo install --path .` puts
//! them for a user). Its shell blocks run in one `bash` (with `-e`), so
//! what a block starts with `&`, its variables and its job numbers
//! (`kill %1`) stay for the later blocks, as in a terminal; a Python block
//! runs in `python3`. Everything a document started is stopped at its end.
//! A block that fails or runs past its time fails the test with the
//! document, the line and what the block printed.
//!
//! The docs use Kafka's usual ports (9092, 9644, ...) as written, so a
//! document whose ports are taken on this host is skipped, by reason.

use rill_tests::{data_dir, skipped};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

const RILL: &str = env!("CARGO_BIN_EXE_rill");

/// The documents whose runnable blocks run, and the ports their commands
/// bind as written.
const DOCUMENTS: &[(&str, &[u16])] = &[
    (
        "README.md",
        &[9092, 9093, 9192, 9193, 9292, 9293, 9644, 9645, 9646],
    ),
    ("docs/security.md", &[9092, 9093, 9094, 9644]),
];

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

/// How a block ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    Succeeded,
    Failed(String),
    TimedOut,
}

/// One document's terminal: a `bash -e` reading commands from a pipe, the
/// leader of a process group that every block and everything they start
/// joins, so that all of it is stopped with the document.
struct Session {
    shell: Child,
    commands: ChildStdin,
    dir: PathBuf,
    path: String,
    log_path: PathBuf,
    blocks_run: usize,
}

impl Session {
    fn start(dir: &Path) -> Session {
        let bin_dir = Path::new(RILL).parent().expect("the binary's dir");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let log_path = dir.join("terminal.log");
        let log = std::fs::File::create(&log_path).expect("terminal log");
        let mut shell = rill_tests::host_command("bash")
            .arg("-e")
            .current_dir(dir)
            .env("PATH", &path)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("terminal log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start bash");
        let commands = shell.stdin.take().expect("bash's stdin");
        Session {
            shell,
            commands,
            dir: dir.to_path_buf(),
            path,
            log_path,
            blocks_run: 0,
        }
    }

    /// Runs `block` to its end: how it ended and what was printed while it
    /// ran (what it started in the background included).
    fn run(&mut self, block: &Block) -> (Outcome, String) {
        let from = std::fs::metadata(&self.log_path).map_or(0, |m| m.len());
        let outcome = match block.language.as_str() {
            "sh" | "bash" | "shell" => self.run_shell(&block.code),
            "python" | "python3" => self.run_python(&block.code),
            other => Outcome::Failed(format!("no runner for `{other}`")),
        };
        let mut output = String::new();
        if let Ok(mut log) = std::fs::File::open(&self.log_path) {
            let _ = log.seek(SeekFrom::Start(from));
            let _ = log.read_to_string(&mut output);
        }
        (outcome, output)
    }

    /// Sources the block in the session's shell, its stdin `/dev/null` (as
    /// a pasted command that reads stdin would see nothing), then waits
    /// for the line the shell prints after it.
    fn run_shell(&mut self, code: &str) -> Outcome {
        self.blocks_run += 1;
        let file = self.dir.join(format!(".block-{}.sh", self.blocks_run));
        std::fs::write(&file, code).expect("write the block");
        // The block's status is printed too: `bash -e` does not stop at a
        // last command negated with `!`, whose failure is the point.
        let done = format!("__rill_doc_block_{}_done__", self.blocks_run);
        let line = format!("source {} < /dev/null\necho {done} $?\n", file.display());
        if self.commands.write_all(line.as_bytes()).is_err() {
            return Outcome::Failed("the shell had exited".into());
        }
        let deadline = Instant::now() + BLOCK_TIMEOUT;
        loop {
            let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
            if let Some(status) = log.lines().find_map(|line| line.strip_prefix(&done)) {
                return match status.trim() {
                    "0" => Outcome::Succeeded,
                    status => Outcome::Failed(format!("the block's status was {status}")),
                };
            }
            if let Ok(Some(status)) = self.shell.try_wait() {
                return Outcome::Failed(format!("the shell exited with {status}"));
            }
            if Instant::now() > deadline {
                return Outcome::TimedOut;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn run_python(&mut self, code: &str) -> Outcome {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log_path)
            .expect("terminal log");
        let mut child = rill_tests::host_command("python3")
            .arg("-c")
            .arg(code)
            .current_dir(&self.dir)
            .env("PATH", &self.path)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("terminal log"))
            .stderr(log)
            .process_group(self.shell.id() as i32)
            .spawn()
            .expect("start python3");
        let deadline = Instant::now() + BLOCK_TIMEOUT;
        loop {
            match child.try_wait().expect("wait for python3") {
                Some(status) if status.success() => return Outcome::Succeeded,
                Some(status) => return Outcome::Failed(format!("exited with {status}")),
                None if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Outcome::TimedOut;
                }
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SIGTERM first, so the brokers a document started stop cleanly.
        let group = self.shell.id() as i32;
        // SAFETY: kill(2) on the session's own process group.
        unsafe {
            libc::kill(-group, libc::SIGTERM);
        }
        std::thread::sleep(Duration::from_secs(2));
        // SAFETY: as above.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
        let _ = self.shell.wait();
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
    let mut session = Session::start(dir.path());
    for block in &blocks {
        let (outcome, output) = session.run(block);
        eprintln!("{document}:{}: {}\n{output}", block.line, block.language);
        if outcome != Outcome::Succeeded {
            // Later blocks build on this one; their failures would only
            // repeat it.
            return vec![format!(
                "{document}:{} ({}) {outcome:?}:\n{}\n--- output ---\n{output}",
                block.line, block.language, block.code
            )];
        }
    }
    Vec::new()
}

#[test]
fn the_runnable_blocks_of_the_user_docs_work_as_written() {
    for tool in ["kcat", "curl"] {
        if Command::new(tool).arg("-V").output().is_err() {
            skipped(&format!("{tool} is not installed (CI installs it)"));
            return;
        }
    }
    let python_client = rill_tests::host_command("python3")
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

fn shell_block(code: &str) -> Block {
    Block {
        language: "sh".into(),
        code: code.into(),
        line: 1,
    }
}

#[test]
fn a_failing_block_fails_with_its_output() {
    let dir = data_dir();
    let mut session = Session::start(dir.path());
    let (outcome, output) = session.run(&shell_block("echo before\nfalse\necho after\n"));
    assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
    assert_eq!(output, "before\n", "bash -e stops at the first failure");
    // A negated last command that succeeds fails its block too.
    let mut session = Session::start(dir.path());
    let (outcome, output) = session.run(&shell_block("! true\n"));
    assert!(
        matches!(outcome, Outcome::Failed(_)),
        "{outcome:?}: {output}"
    );
}

#[test]
fn jobs_and_variables_last_from_block_to_block_and_stop_with_the_session() {
    let dir = data_dir();
    let mut session = Session::start(dir.path());
    let start = shell_block("GREETING=hello\nsleep 30 &\necho $! > bg.pid\n");
    assert_eq!(session.run(&start).0, Outcome::Succeeded);
    let check = shell_block("kill -0 %1\necho \"$GREETING\"\n");
    let (outcome, output) = session.run(&check);
    assert_eq!(outcome, Outcome::Succeeded, "{output}");
    assert!(output.starts_with("hello\n"), "{output}");
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
