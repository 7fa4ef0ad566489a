//! The model provider's streamed answer (`chat/provider.rs` `read_completion`): server-sent
//! events of Chat Completions chunks, read as the agent reads them, with the body cut into
//! pieces where the fuzzer says (the first byte is the piece size).
//!
//! What must hold, for any bytes: no panic; an answer is bounded — at most `MAX_TOOL_CALLS` tool
//! calls, each with a name and an id, and the text and arguments together no longer than what
//! was sent; the text handed out piece by piece is the answer's text; a refusal is a message
//! saying what is wrong.
#![no_main]

use gateway_host::fuzzing::{read_completion, MAX_TOOL_CALLS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, body)) = data.split_first() else { return };
    let piece = usize::from(piece).max(1);
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body.chunks(piece).map(|c| Ok(c.to_vec())).collect();
    let mut streamed = String::new();
    let read = futures::executor::block_on(read_completion(futures::stream::iter(chunks), |text| streamed.push_str(text)));
    match read {
        Ok(completion) => {
            assert_eq!(completion.text, streamed, "the text handed out is the answer's");
            assert!(completion.tool_calls.len() <= MAX_TOOL_CALLS, "{} tool calls", completion.tool_calls.len());
            let size = completion.text.len() + completion.tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum::<usize>();
            assert!(size <= body.len(), "an answer of {size} bytes from {} bytes", body.len());
            for call in &completion.tool_calls {
                assert!(!call.name.is_empty() && !call.id.is_empty(), "{call:?}");
            }
        }
        Err(e) => assert!(!e.to_string().trim().is_empty()),
    }
});
