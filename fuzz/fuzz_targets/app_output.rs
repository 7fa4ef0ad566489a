//! A stdio app's output as the gateway reads it (`upstream/short_way/stdio.rs` `DivertingReader`):
//! the answers of the short way taken off for the requests waiting for them (`gw-1`, `gw-2`
//! here), every other line passed on to rmcp, a line over the message cap dropped as it comes.
//! The first byte sets the cap (16–271 bytes, so that long lines are common), the second the
//! size of the pieces the output arrives in.
//!
//! What must hold, for any bytes: no panic; every line rmcp gets is a line of the app's output
//! within the cap, or the error the gateway writes in place of an over-cap answer; a waiting
//! request gets at most one answer, the result (or error) of a line of the output naming its id,
//! within the cap; what the reader keeps allocated stays within a few caps and pieces, whatever
//! the output.
#![no_main]

use std::pin::Pin;
use std::task::{Context, Poll};

use libfuzzer_sys::fuzz_target;
use mcpapp_plugin::upstream::short_way::stdio::DivertingReader;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};

/// The app's output, `piece` bytes at a time.
struct Pieces<'a> {
    data: &'a [u8],
    piece: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(mut self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let n = self.piece.min(self.data.len()).min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

fuzz_target!(|data: &[u8]| {
    let [cap, piece, output @ ..] = data else { return };
    let max_line = 16 + usize::from(*cap);
    let piece = usize::from(*piece).max(1);
    let (mut reader, mut answers) = DivertingReader::for_fuzzing(Pieces { data: output, piece }, max_line, &["gw-1", "gw-2"]);
    let input_lines: Vec<&[u8]> = output.split_inclusive(|b| *b == b'\n').collect();
    let mut passed = Vec::new();
    let mut buf = vec![0u8; 4096];
    futures::executor::block_on(async {
        loop {
            let n = reader.read(&mut buf).await.expect("reading from memory cannot fail");
            // The reader's buffers: a line up to the cap, a piece, and what rmcp has not read.
            let held = reader.held_capacity();
            assert!(held <= 4 * (max_line + 8192) + 2 * buf.len(), "the reader holds {held} bytes (cap {max_line})");
            if n == 0 {
                break;
            }
            passed.extend_from_slice(&buf[..n]);
        }
    });
    for line in passed.split_inclusive(|b| *b == b'\n') {
        if input_lines.contains(&line) {
            assert!(line.len() <= max_line || !line.ends_with(b"\n"), "an over-cap line reached rmcp: {} bytes", line.len());
            continue;
        }
        let error: Value = serde_json::from_slice(line).unwrap_or_else(|e| panic!("rmcp got a line the app never wrote ({e}): {:?}", String::from_utf8_lossy(line)));
        assert_eq!(error["error"]["code"], -32603, "{error}");
        assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains(&format!("larger than {max_line} bytes"))), "{error}");
    }
    for (id, answer) in ["gw-1", "gw-2"].iter().zip(answers.iter_mut()) {
        match answer.try_recv() {
            Ok(Ok(result)) => {
                // The reader reads the answer once and hands the request its result as the app
                // wrote it: the `result` of one of the output's lines within the cap, a response
                // named by the request's id.
                let result = result.into_value().expect("a result the reader took is JSON");
                let of_the_output = input_lines.iter().any(|l| {
                    l.len() <= max_line
                        && serde_json::from_slice::<Value>(l)
                            .is_ok_and(|v| v["id"] == *id && v.get("method").is_none() && v.get("result") == Some(&result))
                });
                assert!(of_the_output, "{id}: not the result of a line of the output");
            }
            Ok(Err(e)) => assert!(!e.to_string().is_empty()),
            Err(_) => {}
        }
    }
});
