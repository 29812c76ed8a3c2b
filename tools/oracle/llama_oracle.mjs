#!/usr/bin/env node
// llama.cpp as an oracle for clover.cpp: runs the prebuilt CPU build of llama.cpp bundled in
// node-llama-cpp 3.22.1 (llama.cpp release v0.5.0) on a GGUF file and reports what it computes.
// Nothing is compiled: getLlama({gpu: false, build: "never"}), every layer on the CPU.
//
//   node tools/oracle/llama_oracle.mjs MODEL.gguf info
//   node tools/oracle/llama_oracle.mjs MODEL.gguf tokenize --text T [--special]
//   node tools/oracle/llama_oracle.mjs MODEL.gguf logits (--text T | --tokens-file IDS.json | --tokens 1,2,3)
//        [--all | --from N] --out OUT.bin [--flash-attn on|off|auto] [--kv-type f32|f16|q8_0] [--threads N] [--batch N]
//   node tools/oracle/llama_oracle.mjs MODEL.gguf generate (--text T | --tokens-file F | --tokens ...) --n N
//        [--threads N] [--flash-attn ...] [--kv-type ...]
//
// Exact mode (what engine tests compare against): --flash-attn off --kv-type f32.
// Logit dumps are little-endian float32 [position][n_vocab] with OUT.bin.json beside them
// ({tokens, positions, n_vocab, shape, dtype, layout}). See docs/oracle.md.

import fs from "node:fs";
import path from "node:path";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const USAGE = `usage: node tools/oracle/llama_oracle.mjs MODEL.gguf <info|tokenize|logits|generate> [options]
  input:    --text T [--special] | --tokens-file IDS.json | --tokens 1,2,3
  logits:   [--all | --from N] --out OUT.bin [--format f32|json]
  generate: --n N
  context:  [--flash-attn on|off|auto] [--kv-type f32|f16|q8_0] [--threads N] [--batch N] [--ctx N]
  output:   [--compact] [--verbose]   (exact mode = --flash-attn off --kv-type f32)`;

const BOOL_FLAGS = new Set(["special", "all", "compact", "verbose", "help"]);

function parseArgs(argv) {
    const positional = [];
    const opts = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith("--")) {
            positional.push(a);
            continue;
        }
        const eq = a.indexOf("=");
        const key = (eq >= 0 ? a.slice(2, eq) : a.slice(2));
        if (BOOL_FLAGS.has(key)) {
            opts[key] = true;
        } else if (eq >= 0) {
            opts[key] = a.slice(eq + 1);
        } else {
            if (i + 1 >= argv.length) fail(`option --${key} needs a value`, 2);
            opts[key] = argv[++i];
        }
    }
    return {positional, opts};
}

function fail(message, code = 1) {
    process.stderr.write(`llama_oracle: ${message}\n`);
    process.exit(code);
}

function intOpt(opts, key, fallback) {
    if (opts[key] === undefined) return fallback;
    const v = Number(opts[key]);
    if (!Number.isInteger(v) || v < 0) fail(`--${key} must be a non-negative integer, got "${opts[key]}"`, 2);
    return v;
}

const round6 = (x) => Math.round(x * 1e6) / 1e6;

// JSON.stringify that survives the BigInt values node-llama-cpp's GGUF reader returns.
function toJson(value, compact) {
    return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? Number(v) : v), compact ? 0 : 1);
}

function print(obj, opts) {
    process.stdout.write(toJson(obj, opts.compact) + "\n");
}

// llama.cpp's log lines arrive through this logger (echoed with --verbose). Errors are added to
// failure messages so load failures explain themselves; the llama_perf lines printed by
// printTimings() are parsed for `generate`.
const logLines = [];
let verbose = false;
function logger(level, message) {
    const text = String(message).replace(/\n$/, "");
    logLines.push({level, text});
    if (verbose)
        process.stderr.write(`[llama.cpp ${level}] ${text}\n`);
}

// llama.cpp's log callbacks reach JS asynchronously: let them drain before reading them.
async function llamaErrors() {
    await new Promise((resolve) => setTimeout(resolve, 50));
    return logLines
        .filter((l) => l.level === LlamaLogLevel.error || l.level === LlamaLogLevel.fatal)
        .map((l) => l.text.trim())
        .filter((text, i, all) => all.indexOf(text) === i); // node-llama-cpp may retry a failed load
}

function parsePerf() {
    // llama_perf_context_print: prompt eval time =  23.85 ms /  11 tokens (...)
    // llama_perf_context_print:        eval time =  17.43 ms /  63 runs   (...)
    const perf = {};
    for (const {text} of logLines) {
        const m = /(prompt eval|eval) time\s*=\s*([\d.]+) ms\s*\/\s*(\d+) (?:tokens|runs)/.exec(text);
        if (!m) continue;
        const ms = Number(m[2]);
        const n = Number(m[3]);
        perf[m[1] === "prompt eval" ? "prompt" : "decode"] = {
            ms, n, tok_per_s: ms > 0 ? Math.round((n * 1000 / ms) * 100) / 100 : null
        };
    }
    return perf;
}

function readTokens(opts, model) {
    if (opts.text !== undefined)
        return model.tokenize(opts.text, !!opts.special);
    if (opts["tokens-file"] !== undefined) {
        let data;
        try {
            data = JSON.parse(fs.readFileSync(opts["tokens-file"], "utf8"));
        } catch (e) {
            fail(`cannot read --tokens-file ${opts["tokens-file"]}: ${e.message}`);
        }
        const ids = Array.isArray(data) ? data : data?.tokens;
        if (!Array.isArray(ids)) fail(`--tokens-file must hold a JSON array of ids or {"tokens": [...]}`);
        return ids;
    }
    if (opts.tokens !== undefined)
        return opts.tokens.split(/[\s,]+/).filter((s) => s.length > 0).map(Number);
    fail("need --text, --tokens-file or --tokens", 2);
}

function checkTokens(tokens, nVocab) {
    if (tokens.length === 0) fail("no input tokens");
    for (const t of tokens)
        if (!Number.isInteger(t) || t < 0 || t >= nVocab) fail(`token id ${t} is outside [0, ${nVocab})`);
}

function contextOptions(opts, nTokensNeeded, threads) {
    const fa = opts["flash-attn"] ?? "auto";
    if (!["on", "off", "auto"].includes(fa)) fail(`--flash-attn must be on, off or auto`, 2);
    const kv = opts["kv-type"];
    if (kv !== undefined && !["f32", "f16", "q8_0"].includes(kv)) fail(`--kv-type must be f32, f16 or q8_0`, 2);
    const ctx = intOpt(opts, "ctx", Math.max(256, Math.ceil((nTokensNeeded + 1) / 256) * 256));
    if (ctx < nTokensNeeded) fail(`--ctx ${ctx} is smaller than the ${nTokensNeeded} tokens needed`, 2);
    const options = {
        contextSize: ctx,
        batchSize: intOpt(opts, "batch", Math.min(512, ctx)),
        sequences: 1,
        threads: {ideal: threads, min: threads},
        flashAttention: fa === "auto" ? "auto" : fa === "on",
        performanceTracking: true
    };
    if (kv !== undefined) {
        options.experimentalKvCacheKeyType = kv.toUpperCase();
        options.experimentalKvCacheValueType = kv.toUpperCase();
    }
    return options;
}

function nVocabOf(model) {
    const n = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
    if (typeof n !== "number") fail("model has no tokenizer.ggml.tokens list: cannot tell n_vocab");
    return n;
}

async function cmdInfo(model, ctxBase, opts) {
    const info = model.fileInfo;
    const arch = info.metadata?.general?.architecture;
    const archMeta = {...(info.metadata?.[arch] ?? {})};
    const t = model.tokens;
    print({
        ...ctxBase,
        architecture: arch,
        name: info.metadata?.general?.name ?? null,
        description: model.typeDescription,
        size_bytes: model.size,
        gguf_version: info.version,
        tensor_count: Number(info.tensorCount),
        n_vocab: nVocabOf(model),
        n_embd: model.embeddingVectorSize,
        n_ctx_train: model.trainContextSize,
        vocabulary_type: model.vocabularyType,
        tokenizer_pre: info.metadata?.tokenizer?.ggml?.pre ?? null,
        special_tokens: {bos: t.bos, eos: t.eos, eot: t.eot, nl: t.nl},
        flash_attention_supported: model.flashAttentionSupported,
        [arch]: archMeta
    }, opts);
}

async function cmdTokenize(model, ctxBase, opts) {
    if (opts.text === undefined) fail("tokenize needs --text", 2);
    const tokens = model.tokenize(opts.text, !!opts.special);
    print({
        ...ctxBase,
        text: opts.text,
        special: !!opts.special,
        tokens,
        pieces: tokens.map((tok) => model.detokenize([tok], true)),
        roundtrip: model.detokenize(tokens, !!opts.special)
    }, opts);
}

// Raw logits through controlledEvaluate: an item [token, {generateNext: {logits: true}}] asks the
// addon for llama_get_logits_ith at that position (the greedy sampler it runs does not alter them).
async function cmdLogits(model, ctxBase, opts, threads) {
    if (opts.out === undefined) fail("logits needs --out OUT.bin", 2);
    const format = opts.format ?? "f32";
    if (!["f32", "json"].includes(format)) fail("--format must be f32 or json", 2);
    const nVocab = nVocabOf(model);
    const tokens = readTokens(opts, model);
    checkTokens(tokens, nVocab);
    // --from N: every position from N on (long prompts: only the far end is compared).
    const from = intOpt(opts, "from", opts.all ? 0 : tokens.length - 1);
    if (from >= tokens.length) fail(`--from ${from} is beyond the ${tokens.length} tokens`, 2);
    const positions = tokens.map((_t, i) => i).filter((i) => i >= from);
    const wanted = new Set(positions);

    const context = await model.createContext(contextOptions(opts, tokens.length, threads));
    const sequence = context.getSequence();
    const items = tokens.map((tok, i) => (wanted.has(i) ? [tok, {generateNext: {logits: true}}] : tok));
    const t0 = performance.now();
    const results = await sequence.controlledEvaluate(items);
    const evalMs = performance.now() - t0;

    const out = new Float32Array(positions.length * nVocab);
    const summary = [];
    positions.forEach((pos, row) => {
        const logits = results[pos]?.next?.logits;
        if (logits === undefined) fail(`llama.cpp returned no logits for position ${pos}`);
        if (logits.size !== nVocab) fail(`position ${pos}: got ${logits.size} logits, expected n_vocab ${nVocab}`);
        const dst = out.subarray(row * nVocab, (row + 1) * nVocab);
        for (const [tok, v] of logits) dst[tok] = v;
        const top = [];
        for (const [tok, v] of logits) { // the map is ordered by logit, highest first
            top.push([tok, round6(v)]);
            if (top.length === 5) break;
        }
        summary.push({pos, argmax: top[0][0], top, first8: Array.from(dst.subarray(0, 8), round6)});
    });

    fs.mkdirSync(path.dirname(path.resolve(opts.out)), {recursive: true});
    if (format === "json") {
        const rows = positions.map((_p, r) => Array.from(out.subarray(r * nVocab, (r + 1) * nVocab)));
        fs.writeFileSync(opts.out, JSON.stringify(rows));
    } else {
        // Float32Array uses the host byte order; every platform node-llama-cpp ships for is little-endian.
        fs.writeFileSync(opts.out, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
    }
    const meta = {
        tokens, positions, n_vocab: nVocab, shape: [positions.length, nVocab],
        dtype: format === "json" ? "json" : "float32", layout: "row-major [position][token]",
        flash_attention: context.flashAttention, kv_type: opts["kv-type"] ?? "default (f16)",
        model: ctxBase.model
    };
    fs.writeFileSync(opts.out + ".json", JSON.stringify(meta));
    print({
        ...ctxBase,
        n_tokens: tokens.length,
        tokens,
        n_vocab: nVocab,
        eval_ms: Math.round(evalMs * 10) / 10,
        flash_attention: context.flashAttention,
        kv_type: meta.kv_type,
        batch: context.batchSize,
        prompt_tok_per_s: Math.round(tokens.length * 1000 / evalMs * 100) / 100,
        positions,
        summary,
        out: opts.out,
        format
    }, opts);
    await context.dispose();
}

// Greedy generation. End-of-generation tokens are reported like any other and generation goes on,
// so the id sequence is comparable token for token with the engine's.
async function cmdGenerate(model, ctxBase, opts, threads) {
    const n = intOpt(opts, "n", undefined);
    if (n === undefined || n < 1) fail("generate needs --n N (N >= 1)", 2);
    const nVocab = nVocabOf(model);
    const prompt = readTokens(opts, model);
    checkTokens(prompt, nVocab);
    const context = await model.createContext(contextOptions(opts, prompt.length + n, threads));
    const sequence = context.getSequence();
    const greedy = {generateNext: {token: true, options: {temperature: 0}}};

    const generated = [];
    const t0 = performance.now();
    const first = await sequence.controlledEvaluate(prompt.map((tok, i) => (i === prompt.length - 1 ? [tok, greedy] : tok)));
    const t1 = performance.now();
    let next = first[prompt.length - 1]?.next?.token;
    while (true) {
        if (next === undefined || next === null) fail(`llama.cpp sampled no token after ${generated.length} tokens`);
        generated.push(next);
        if (generated.length === n) break;
        const r = await sequence.controlledEvaluate([[next, greedy]]);
        next = r[0]?.next?.token;
    }
    const t2 = performance.now();
    await context.printTimings();
    const promptMs = t1 - t0;
    const decodeMs = t2 - t1;
    print({
        ...ctxBase,
        n_prompt: prompt.length,
        prompt,
        n_generated: generated.length,
        generated,
        text: model.detokenize(generated, true),
        flash_attention: context.flashAttention,
        kv_type: opts["kv-type"] ?? "default (f16)",
        prompt_ms: Math.round(promptMs * 10) / 10,
        decode_ms: Math.round(decodeMs * 10) / 10,
        prompt_tok_per_s: Math.round(prompt.length * 1000 / promptMs * 100) / 100,
        // the first generated token comes from the prompt pass; n-1 decode steps follow
        decode_tok_per_s: n > 1 ? Math.round((n - 1) * 1000 / decodeMs * 100) / 100 : null,
        llama_perf: parsePerf()
    }, opts);
    await context.dispose();
}

async function main() {
    const {positional, opts} = parseArgs(process.argv.slice(2));
    if (opts.help || positional.length < 2) {
        process.stderr.write(USAGE + "\n");
        process.exit(opts.help ? 0 : 2);
    }
    verbose = !!opts.verbose;
    const [modelPath, cmd] = positional;
    const commands = {info: cmdInfo, tokenize: cmdTokenize, logits: cmdLogits, generate: cmdGenerate};
    if (!(cmd in commands)) fail(`unknown command "${cmd}"\n${USAGE}`, 2);
    if (!fs.existsSync(modelPath)) fail(`model file not found: ${modelPath}`);

    const llama = await getLlama({
        gpu: false, build: "never", logLevel: LlamaLogLevel.info, logger, progressLogs: false
    });
    const threads = intOpt(opts, "threads", llama.cpuMathCores);
    const t0 = performance.now();
    let model;
    try {
        model = await llama.loadModel({
            modelPath, gpuLayers: 0, vocabOnly: cmd === "tokenize" // info loads the weights too, to validate them
        });
    } catch (e) {
        const errs = await llamaErrors();
        fail(`failed to load ${modelPath}: ${e.message}` + (errs.length ? `\n  llama.cpp: ${errs.join("\n  llama.cpp: ")}` : ""));
    }
    const ctxBase = {
        model: modelPath, cmd, llama_cpp: llama.llamaCppRelease?.release ?? null, threads,
        load_ms: Math.round((performance.now() - t0) * 10) / 10
    };
    try {
        await commands[cmd](model, ctxBase, opts, threads);
    } catch (e) {
        const errs = await llamaErrors();
        fail(`${cmd} failed: ${e.message}` + (errs.length ? `\n  llama.cpp: ${errs.join("\n  llama.cpp: ")}` : ""));
    }
    await model.dispose();
    await llama.dispose();
}

await main();
