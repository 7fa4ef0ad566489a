//! The model provider's answer (`chat/provider.rs`): server-sent events of Chat Completions
//! chunks (`read_completion`), and the same bytes as one whole JSON completion
//! (`read_whole_completion`, a server that does not stream), read as the agent reads them, with
//! the body cut into pieces where the fuzzer says (the first byte is the piece size).
//!
//! What must hold, for any bytes, for both readers: no panic; an answer is bounded — at most
//! `MAX_TOOL_CALLS` tool calls, each with a name and an id, and the text and arguments together
//! no longer than what was sent; the text handed out is the answer's text; a refusal is a
//! message saying what is wrong.
#![no_main]

use gateway_host::fuzzing::{read_completion, read_whole_completion, Completion, ProviderError, MAX_TOOL_CALLS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, body)) = data.split_first() else { return };
    let piece = usize::from(piece).max(1);
    let chunks = || futures::stream::iter(body.chunks(piece).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>());
    let mut streamed = String::new();
    let read = futures::executor::block_on(read_completion(chunks(), |text| streamed.push_str(text)));
    holds(read, &streamed, body);
    let mut handed = String::new();
    let read = futures::executor::block_on(read_whole_completion(chunks(), |text| handed.push_str(text)));
    holds(read, &handed, body);
});

fn holds(read: Result<Completion, ProviderError>, handed: &str, body: &[u8]) {
    match read {
        Ok(completion) => {
            assert_eq!(completion.text, handed, "the text handed out is the answer's");
            assert!(completion.tool_calls.len() <= MAX_TOOL_CALLS, "{} tool calls", completion.tool_calls.len());
            let size = completion.text.len() + completion.tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum::<usize>();
            assert!(size <= body.len(), "an answer of {size} bytes from {} bytes", body.len());
            for call in &completion.tool_calls {
                assert!(!call.name.is_empty() && !call.id.is_empty(), "{call:?}");
            }
        }
        Err(e) => assert!(!e.to_string().trim().is_empty()),
    }
}
