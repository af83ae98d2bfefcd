/* tests/unit/test_config.c: the command line: presets and overrides, defaults,
 * and one clear DDP_ERR_INPUT line naming the option for every bad value. */
#include <unistd.h>

#include "common/config/fields.h"
#include "testutil.h"
#include "tu_flip.h"

static void bad(const char *args, const char *must_contain)
{
    config_t c;
    char err[ERR_LEN] = "";
    int rc = tu_parse(&c, args, err);
    cr_assert_eq(rc, DDP_ERR_INPUT, "'%s' was accepted (rc %d)", args, rc);
    cr_assert(strstr(err, must_contain), "'%s': message '%s' lacks '%s'", args, err, must_contain);
    cr_assert_null(strchr(err, '\n'), "one line: '%s'", err);
}

Test(config, malformed_values_name_their_option)
{
    bad("--batch 0", "--batch");
    bad("--batch -4", "--batch");
    bad("--batch 12x", "--batch: '12x' is not an integer");
    bad("--batch abc", "--batch");
    bad("--lr fast", "--lr: 'fast' is not a number");
    bad("--lr nan", "--lr");
    bad("--lr -0.1", "--lr");
    bad("--epochs 0", "--epochs");
    bad("--steps -1", "--steps");
    bad("--threads 0", "--threads");
    bad("--seed -3", "--seed");
    bad("--timeout 0", "--timeout");
    bad("--bucket-mb 0", "--bucket-mb");
    bad("--tolerance 150", "--tolerance");
    bad("--samples 0", "--samples");
    bad("--momentum inf", "--momentum");
    /* --repeat keeps every run's summary: no more than it can hold */
    bad("--repeat 101", "--repeat");
    bad("--repeat 0", "--repeat");
}

Test(config, unknown_names_list_the_choices)
{
    bad("--mode fast", "--mode: unknown value 'fast' (one of: single, dp, ddp, compare, comm)");
    bad("--act swish", "--act");
    bad("--act none", "--act");
    bad("--loss hinge", "--loss");
    bad("--optim lamb", "--optim");
    bad("--backend tpu", "--backend");
    bad("--comm mpi", "--comm");
    bad("--model gpt2", "--model: unknown preset 'gpt2'");
    bad("--dataset images", "--dataset");
}

Test(config, device_lists)
{
    bad("--gpus ,", "--gpus");
    bad("--gpus 0,,1", "--gpus");
    bad("--gpus -1", "--gpus");
    bad("--gpus 0,x", "--gpus");
    bad("--mode dp --backend cpu --gpus 0,0", "--gpus: device 0 appears twice");
    bad("--mode single --backend cpu --gpus 0,1", "--gpus: --mode single uses one device");
    bad("--mode ddp --backend cpu --gpus 0,1,2 --rank-samples 5,5", "--rank-samples: 2 counts for 3 ranks");
    bad("--mode ddp --backend cpu --gpus 0,1,2 --sampler-replicas 2",
        "--sampler-replicas: ddp's DistributedSampler has one replica per rank (3), got 2");
    bad("--batch 12 --batch-per-device 4", "--batch and --batch-per-device: choose one");
    bad("--rank-samples 4,x", "--rank-samples");
    bad("--sampler-replicas 0", "--sampler-replicas: 0 is too small (at least 1)");
    bad("--rank-samples 5,5 --sampler-replicas 3", "--sampler-replicas: 3, but --rank-samples lists 2");
    config_t c;
    char err[ERR_LEN];
    /* any device count takes any batch: ddp deals it out (86, 85, 85) */
    cr_assert_eq(tu_parse(&c, "--mode ddp --backend cpu --gpus 0,1,2 --batch 256", err), DDP_OK,
                 "%s", err);
    cr_assert_eq(c.sampler_replicas, 3, "ddp's sampler has one replica per rank");
    /* --batch-per-device: the global batch is N x devices; compare's single runs all of it */
    cr_assert_eq(tu_parse(&c, "--backend cpu --gpus 0,1,2 --batch-per-device 32", err), DDP_OK,
                 "%s", err);
    cr_assert_eq(c.batch, 96);
    cr_assert_eq(c.sampler_replicas, 3, "compare: every mode reads ddp's stream");
    cr_assert_eq(tu_parse(&c, "--mode single --backend cpu --batch-per-device 32", err), DDP_OK,
                 "%s", err);
    cr_assert_eq(c.batch, 32);
    cr_assert_eq(c.sampler_replicas, 1, "single alone reads the data as it is");
    cr_assert_eq(tu_parse(&c, "--mode single --backend cpu --batch-per-device 8 --rank-samples 9,9,9", err),
                 DDP_OK, "%s", err);
    cr_assert_eq(c.batch, 24, "8 for each of the 3 ranks whose stream single reads");
    cr_assert_eq(config_stream_ranks(&c), 3);
    cr_assert_eq(tu_parse(&c, "--mode dp --backend cpu --gpus 3,1,2", err), DDP_OK, "%s", err);
    cr_assert_eq(c.ngpus, 3);
    cr_assert_eq(c.gpus[0], 3);
    cr_assert_eq(tu_parse(&c, "--mode dp --backend cpu", err), DDP_OK, "%s", err);
    cr_assert_geq(c.ngpus, 1, "auto gives at least one worker");
}

Test(config, options_and_arguments)
{
    bad("--no-such-option", "unknown option '--no-such-option'");
    bad("--batch", "--batch: needs a value");
    bad("stray", "unexpected argument 'stray'");
    bad("--layers 10", "--layers");
    bad("--layers 10,0,2", "--layers");
    bad("--layers 10,x", "--layers");
}

Test(config, cross_field_rules)
{
    bad("--optim sgd --nesterov", "--nesterov: requires --momentum > 0");
    bad("--loss ce --layers 4,1", "--loss ce: the last layer must have >= 2 outputs");
    bad("--targets y.npy", "--targets: needs --data");
    bad("--data x.npy", "needs --targets");
    bad("--data x.csv --targets y.npy", "--targets");
    bad("--checkpoint-every 5", "--checkpoint-every: needs --checkpoint");
    bad("--json --csv", "--json and --csv");
    bad("--tf32 --backend cpu", "--precision tf32: needs --backend cuda");
    bad("--precision tf32 --backend cpu", "--precision tf32: needs --backend cuda");
    bad("--precision fp16", "--precision: unknown value 'fp16' (one of: fp32, tf32, bf16)");
}

Test(config, presets_fill_and_options_override)
{
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--model seed-logreg", err), DDP_OK, "%s", err);
    cr_assert_eq(c.ndims, 2);
    cr_assert_eq(c.dims[0], 10);
    cr_assert_eq(c.dims[1], 1);
    cr_assert_eq(c.loss, LOSS_BCE);
    cr_assert_float_eq(c.optim.lr, 0.01f, 1e-9f);
    cr_assert_eq(c.samples, 100);
    cr_assert_eq(c.batch, 10);
    cr_assert_eq(c.epochs, 10);
    /* an explicit option wins wherever it stands relative to --model */
    cr_assert_eq(tu_parse(&c, "--lr 0.5 --model seed-logreg --batch 20", err), DDP_OK, "%s", err);
    cr_assert_float_eq(c.optim.lr, 0.5f, 1e-9f);
    cr_assert_eq(c.batch, 20);
    cr_assert_eq(tu_parse(&c, "--model mlp-medium", err), DDP_OK, "%s", err);
    cr_assert_eq(c.ndims, 4);
    cr_assert_eq(c.dims[1], 2048);
    cr_assert_eq(c.batch, 256);
}

Test(config, torch_defaults)
{
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--optim adamw", err), DDP_OK, "%s", err);
    cr_assert_float_eq(c.optim.weight_decay, 0.01f, 1e-9f, "AdamW's default weight decay");
    cr_assert_eq(tu_parse(&c, "--optim adamw --weight-decay 0", err), DDP_OK, "%s", err);
    cr_assert_float_eq(c.optim.weight_decay, 0.0f, 1e-9f);
    cr_assert_eq(tu_parse(&c, "--optim adam", err), DDP_OK, "%s", err);
    cr_assert_float_eq(c.optim.weight_decay, 0.0f, 1e-9f);
    cr_assert_float_eq(c.optim.beta2, 0.999f, 1e-9f);
    cr_assert_float_eq(c.optim.eps, 1e-8f, 1e-12f);
}

Test(config, help_lists_every_option_with_its_default)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_t c;
    config_line_t line;
    cmdline_init(&line, &c, &tu_gate, &tu_opts);
    config_line_usage(&line, f);
    fclose(f);
    const char *must[] = {"--mode", "--gpus", "--backend", "--threads", "--model", "--layers",
                          "--act", "--loss", "--optim", "--lr", "--momentum", "--dampening",
                          "--nesterov", "--weight-decay", "--beta1", "--beta2", "--eps", "--seed",
                          "--samples", "--data", "--targets", "--target-cols", "--batch",
                          "--epochs", "--steps", "--shuffle", "--no-shuffle", "--drop-last",
                          "--warmup-steps", "--quiet", "--version", "[compare]", "[auto]",
                          "seed-linear", "seed-logreg", "mlp-medium", "--scenario", "--mem-limit",
                          "--emit-pytorch", "--baseline", "--tolerance", "--against",
                          "--gate-budget", "--candidate"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_assert(strstr(buf, must[i]), "--help lacks %s", must[i]);
    free(buf);
}

static void parse_only(config_t *c, const char *args)
{
    char err[ERR_LEN] = "";
    cr_assert_eq(tu_parse_args(c, args, err), DDP_OK, "'%s': %s", args, err);
}

Test(config, every_default_is_written_once)
{
    /* config_defaults() is what a bare command line gives ... */
    config_t d, bare, spelled;
    config_defaults(&d);
    parse_only(&bare, "");
    cr_assert_eq(memcmp(&d, &bare, sizeof d), 0, "config_defaults differs from no options");
    /* ... and every default --help shows, given explicitly, changes nothing */
    parse_only(&spelled, "--mode compare --gpus auto --backend auto --threads 1 --model mlp-small "
                         "--dampening 0 --weight-decay 0 --beta1 0.9 --beta2 0.999 --eps 1e-8 "
                         "--seed 0 --dataset auto --noise 0.1 --target-cols 1 --accum 1 "
                         "--shuffle --warmup-steps 2 --log-every 0 --comm auto --bucket-mb 25 "
                         "--first-bucket-mb 1 --overlap --timeout 60 --tolerance 5");
    cr_assert_eq(memcmp(&d, &spelled, sizeof d), 0, "a default in --help is not the default");
    cr_assert(d.shuffle && d.overlap && d.timeout_s == 60.0 && d.warmup_steps == 2);
    cr_assert_eq(d.act, ACT_GELU, "the default preset's activation");
    /* a preset's values are the defaults the rows marked [preset] show */
    config_t p;
    char err[ERR_LEN];
    cr_assert_eq(config_defaults_for(&p, "mlp-medium", err), DDP_OK, "%s", err);
    cr_assert_eq(p.act, ACT_RELU);
    cr_assert_float_eq(p.optim.momentum, 0.9f, 1e-9f);
    cr_assert_eq(config_defaults_for(&p, "nope", err), DDP_ERR_INPUT);
}

Test(config, ranges_and_numbers_say_what_is_wrong)
{
    bad("--timeout 0", "--timeout: 0 is too small (it must be more than 0)");
    bad("--lr 2e6", "--lr: 2e6 is too large (at most 1e+06)");
    bad("--beta1 1", "--beta1: 1 is too large (it must be less than 1)");
    bad("--batch 0", "--batch: 0 is too small (at least 1)");
    bad("--steps 99999999999999999999", "--steps: 99999999999999999999 is too large");
    bad("--gpus 2147483647", "--gpus: 2147483647 in '2147483647' is too large (at most 1048576)");
    bad("--gpus 0,99999999999", "--gpus: 99999999999 in '0,99999999999' is too large");
    bad("--gpus +1", "is not a list of non-negative integers");
    /* strtod's hex floats are no decimal number */
    bad("--lr 0x1p-3", "--lr: '0x1p-3' is not a number");
    bad("--timeout 0x10", "--timeout: '0x10' is not a number");
    bad("--batch 1e3", "--batch: '1e3' is not an integer");
}

Test(config, a_network_other_than_the_presets_is_custom)
{
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--layers 64,32,10", err), DDP_OK, "%s", err);
    cr_assert_str_empty(c.model_name, "labelled '%s'", c.model_name);
    cr_assert_eq(tu_parse(&c, "--model mlp-small --act relu", err), DDP_OK, "%s", err);
    cr_assert_str_empty(c.model_name);
    cr_assert_eq(tu_parse(&c, "--layers 64,512,512,10 --lr 0.1", err), DDP_OK, "%s", err);
    cr_assert_str_eq(c.model_name, "mlp-small", "the preset's own network keeps its name");
}

Test(config, outputs_that_clash)
{
    char dir[] = "/tmp/ddp_clash_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char a[128], b[128], args[512];
    snprintf(a, sizeof a, "%s/x.st", dir);
    snprintf(b, sizeof b, "%s/./x.st", dir);
    snprintf(args, sizeof args, "--checkpoint %s --save %s", a, b);
    bad(args, "are the same file: the save would overwrite the other output");
    snprintf(args, sizeof args, "--checkpoint %s --trace %s", a, a);
    bad(args, "are the same file");
    /* an existing input, by device and inode: a hard link is the same file */
    snprintf(a, sizeof a, "%s/d.csv", dir);
    snprintf(b, sizeof b, "%s/h.csv", dir);
    FILE *f = fopen(a, "w");
    cr_assert_not_null(f);
    fputs("1,2\n", f);
    fclose(f);
    cr_assert_eq(link(a, b), 0);
    snprintf(args, sizeof args, "--data %s --layers 1,1 --loss mse --save %s", a, b);
    bad(args, "would overwrite an input");
    /* the two pairs that may share a file */
    config_t c;
    char err[ERR_LEN];
    snprintf(args, sizeof args, "--resume %s/c.st --checkpoint %s/c.st", dir, dir);
    cr_assert_eq(tu_parse(&c, args, err), DDP_OK, "%s", err);
    snprintf(args, sizeof args, "--init %s/w.st --save %s/w.st", dir, dir);
    cr_assert_eq(tu_parse(&c, args, err), DDP_OK, "%s", err);
    unlink(a);
    unlink(b);
    rmdir(dir);
}

/* --emit-pytorch FILE.py writes the script and four files beside it: none
 * may be another output or an input (the twin would replace a --data file,
 * a --trace would replace the twin's weights). */
Test(config, the_twin_files_clash_like_the_other_outputs)
{
    bad("--mode single --emit-pytorch /tmp/t.py --save /tmp/t.py",
        "--save /tmp/t.py and --emit-pytorch /tmp/t.py are the same file");
    bad("--mode single --emit-pytorch /tmp/t.py --trace /tmp/./t.init.safetensors",
        "and --emit-pytorch /tmp/t.init.safetensors are the same file");
    bad("--mode single --emit-pytorch /tmp/t.py --checkpoint /tmp/t.order.npy", "same file");
    bad("--mode single --emit-pytorch /tmp/t.py --data /tmp/t.x.npy --targets /tmp/t.y.npy",
        "--emit-pytorch /tmp/t.x.npy and --data /tmp/t.x.npy are the same file: the emit-pytorch "
        "would overwrite an input");
    bad("--mode single --emit-pytorch /tmp/t.py --init /tmp/t.init.safetensors", "an input");
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--mode single --emit-pytorch /tmp/t.py --save /tmp/t.st", err),
                 DDP_OK, "%s", err);
}

/* The rows that change the result and that a resumed run may still change,
 * each for the reason docs/checkpoints.md gives: any other row that changes
 * the result is a fact a checkpoint records and --resume checks, so a new
 * one is recorded unless it is added here, deliberately. */
static const char *const resume_may_change[] = {
    "steps", "epochs", /* where the run ends */
    "backend",         /* a checkpoint moves between the CPU and a GPU */
    "join",            /* a run that ends computes the same with or without it */
    "init", "resume",  /* the start itself (the two are refused together) */
};

Test(config_fields, a_checkpoint_records_what_changes_the_result)
{
    size_t nfree = sizeof resume_may_change / sizeof *resume_may_change;
    for (int i = 0; i < config_fields(); i++) {
        const char *n = config_field_name(i);
        const config_derive_t *d = config_field_derive(i);
        bool listed = false;
        for (size_t k = 0; k < nfree; k++)
            listed |= strcmp(n, resume_may_change[k]) == 0;
        if (d->effect & CF_ARITH)
            cr_expect(d->ckpt != C_FREE || listed,
                      "--%s changes the result, but a resumed run may change it (CKPT_FREE): "
                      "record it (CKPT), or say why not in docs/checkpoints.md and here", n);
        cr_expect(!listed || ((d->effect & CF_ARITH) && d->ckpt == C_FREE),
                  "--%s is listed as free on resume but is not a CKPT_FREE row that changes "
                  "the result", n);
    }
    for (size_t k = 0; k < nfree; k++)
        cr_expect_geq(config_field_find(resume_may_change[k]), 0, "no row --%s",
                      resume_may_change[k]);
}

/* Every option row says what it changes, and that decides where it must
 * appear (config/fields.h): a row added without its derivations fails here,
 * naming the option and what it lacks.  (test_launch, test_report and
 * test_checkpoint flip each option and check that the fingerprint, the
 * echo and a checkpoint see it.) */
Test(config_fields, every_row_says_what_derives_from_it)
{
    config_t c;
    config_defaults(&c);
    for (int i = 0; i < config_fields(); i++) {
        const char *n = config_field_name(i);
        const config_derive_t *d = config_field_derive(i);
        if (strncmp(n, "no-", 3) == 0) { /* --no-X: X's row carries the field */
            cr_expect_geq(config_field_find(n + 3), 0, "--%s has no --%s row", n, n + 3);
            cr_expect_eq(d->effect, 0, "--%s: its derivations are --%s's", n, n + 3);
            continue;
        }
        cr_expect(d->effect, "--%s says nothing about what it changes (EFF)", n);
        bool shared = d->effect & (CF_ARITH | CF_SHARED);
        bool in_fp = d->fp != FP_NONE || d->fpv == FPV_RANK0;
        cr_expect_eq(shared, in_fp, "--%s: %s", n,
                     shared ? "changes what the ranks compute but is not in the fingerprint"
                            : "is in the fingerprint but changes nothing the ranks share");
        if (d->effect & CF_ARITH) {
            cr_expect(d->jsonv, "--%s changes the result: say how the JSON echo shows it", n);
            cr_expect(d->ckpt, "--%s changes the result: say what a checkpoint does with it", n);
            cr_expect(d->twinv, "--%s changes the result: say what the twin does with it", n);
        }
        bool keyed = d->jsonv == J_VALUE || d->jsonv == J_DERIVED;
        cr_expect_eq(d->json != NULL, keyed, "--%s: a JSON key goes with JSON or JSON_D", n);
        cr_expect_eq(d->base != B_UNSAID, d->json != NULL,
                     "--%s: an echoed key says whether a baseline must match it, and only "
                     "then", n);
        cr_expect_eq(d->twin != NULL, d->twinv == T_CONST || d->twinv == T_DERIVED,
                     "--%s: a twin constant's name goes with TWIN or TWIN_D", n);
        cr_expect(!d->optims || d->ckpt == C_FACT, "--%s: only a fact is per optimizer", n);
        config_value_t v;
        config_field_value(&c, i, &v);
        bool valued = (d->fp && d->fpv != FPV_DERIVED) || d->jsonv == J_VALUE ||
                      d->ckpt == C_FACT || d->twinv == T_CONST;
        cr_expect(!valued || v.type != CV_NONE, "--%s is derived from but has no value", n);
        char text[128];
        config_value_text(&v, "on", "off", text, sizeof text);
        config_t other = c;
        char err[ERR_LEN] = "";
        if (valued) /* the tests that flip it must be able to */
            cr_expect_eq(tu_field_flip(&other, i, err), DDP_OK, "%s", err);
    }
}

Test(config, which_dp_steps_cuda_graphs_replay)
{
    /* dp is captured (one graph of every device) on peer copies; over NCCL
     * on distinct GPUs auto runs it eagerly and says why, on captures it;
     * --accum still does not qualify. */
    config_t c;
    config_defaults(&c);
    c.backend = BACKEND_CUDA;
    c.mode = MODE_DP;
    c.ngpus = 2;
    c.gpus[0] = c.gpus[1] = 0;
    cr_assert(!config_dp_nccl(&c), "--gpus 0,0 is one GPU: peer copies");
    cr_assert_null(config_graph_why_not(&c, MODE_DP), "%s", config_graph_why_not(&c, MODE_DP));
    cr_assert(config_graphs_on(&c, MODE_DP));
    c.gpus[1] = 1;
    if (config_dp_nccl(&c)) { /* built with NCCL */
        const char *why = config_graph_why_not(&c, MODE_DP);
        cr_assert(why && strstr(why, "NCCL") && strstr(why, "--cuda-graph on"), "%s",
                  why ? why : "(captured)");
        c.cuda_graph = CUDA_GRAPH_ON;
        cr_assert_null(config_graph_why_not(&c, MODE_DP), "--cuda-graph on: %s",
                       config_graph_why_not(&c, MODE_DP));
    }
    c.accum = 2;
    cr_assert(config_graph_why_not(&c, MODE_DP) && !config_graphs_on(&c, MODE_DP));
}
