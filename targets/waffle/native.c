/* WAFFLe's batched step on a CPU, compiled: the factor selection (forward and backward), the
 * elementwise work around the low-rank products (ReLU, the r gradient, the batch gather) and
 * the dense output layer with the loss (`dense_head`).
 *
 * The selection has the formulas of derivation.py (B1-B8) as selection.py (SelectionStep)
 * arranges them, element by element, so that a step pays two calls instead of ~60 torch
 * operations; see native.py for why and how it is built. float32 throughout, as the eager path; the loops without a
 * dependence between factors are marked `omp simd`, so gcc vectorises them with glibc's libmvec
 * (expf, logf, expm1f). Sums run in a fixed order, so the same inputs give the same bits.
 *
 * Layout: every (C, F) array is contiguous; `sel` holds the three stored parameters
 * (pi_logit, log_c, log_d) as planes `plane` floats apart; `cache` holds 8 planes of C*F. */

#include <math.h>
#include <stdint.h>

#pragma omp declare simd notinbranch
extern float expf(float);
#pragma omp declare simd notinbranch
extern float logf(float);
#pragma omp declare simd notinbranch
extern float expm1f(float);

enum { RELAXED, QN, P, RATIO, INNER, T, CC, DD, PLANES };

static const float LOG_CD_MAX = 7.0f;
static const float INNER_MIN = 1e-30f;
static const float EULER = 0.5772156649015329f;

#pragma omp declare simd notinbranch
static inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

#pragma omp declare simd notinbranch
static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* digamma and trigamma: six steps of their recurrences, then the asymptotic series at x + 6
 * (Abramowitz and Stegun 6.3.18, 6.4.12); relative error below 1e-7 over [e^-7, e^7]. */
#pragma omp declare simd notinbranch
static inline float digammaf(float x) {
    float shift = 1.0f / x + 1.0f / (x + 1.0f) + 1.0f / (x + 2.0f) + 1.0f / (x + 3.0f)
                + 1.0f / (x + 4.0f) + 1.0f / (x + 5.0f);
    float y = x + 6.0f, i2 = 1.0f / (y * y);
    float series = i2 * (1.0f / 12 - i2 * (1.0f / 120 - i2 * (1.0f / 252 - i2 * (1.0f / 240))));
    return logf(y) - 0.5f / y - series - shift;
}

#pragma omp declare simd notinbranch
static inline float trigammaf(float x) {
    float shift = 1.0f / (x * x) + 1.0f / ((x + 1.0f) * (x + 1.0f)) + 1.0f / ((x + 2.0f) * (x + 2.0f))
                + 1.0f / ((x + 3.0f) * (x + 3.0f)) + 1.0f / ((x + 4.0f) * (x + 4.0f))
                + 1.0f / ((x + 5.0f) * (x + 5.0f));
    float y = x + 6.0f, iy = 1.0f / y, i2 = iy * iy;
    float series = iy * i2 * (1.0f / 6 - i2 * (1.0f / 30 - i2 * (1.0f / 42 - i2 * (1.0f / 30))));
    return shift + iy + 0.5f * i2 + series;
}

/* b (C, F) and the cache, from the stored parameters and the step's noise. tau, tuning: per
 * client; tuning nonzero: b = pi 1[pi >= kappa] (fine-tuning), else the relaxed draw. */
void selection_forward(int clients, int factors, const float *sel, long plane, const float *logistic,
                       const float *log_1mu_v, const float *tau, const uint8_t *tuning, float scale,
                       float kappa, float logit_max, float log_v_min, float log_p_min, float *b,
                       float *cache) {
    long n = (long)clients * factors;
    for (int c = 0; c < clients; c++) {
        const float *s0 = sel + (long)c * factors, *s1 = s0 + plane, *s2 = s1 + plane;
        long o = (long)c * factors;
        float tau_c = tau[c];
        #pragma omp simd
        for (int f = 0; f < factors; f++) {
            float q = clampf(s0[f] * scale, -logit_max, logit_max);
            float qn = q + logistic[o + f];
            float relaxed = sigmoidf(qn / tau_c);
            float pi = sigmoidf(q);
            b[o + f] = tuning[c] ? (pi >= kappa ? pi : 0.0f) : relaxed;
            float cc = expf(clampf(s1[f] * scale, -LOG_CD_MAX, LOG_CD_MAX));
            float dd = expf(clampf(s2[f] * scale, -LOG_CD_MAX, LOG_CD_MAX));
            float t = log_1mu_v[o + f] / dd;
            float inner = -expm1f(t);
            float ratio = logf(inner < INNER_MIN ? INNER_MIN : inner) / cc;
            cache[RELAXED * n + o + f] = relaxed;
            cache[QN * n + o + f] = qn;
            cache[RATIO * n + o + f] = ratio;
            cache[INNER * n + o + f] = inner;
            cache[T * n + o + f] = t;
            cache[CC * n + o + f] = cc;
            cache[DD * n + o + f] = dd;
        }
        float *p = cache + P * n + o;
        const float *ratio = cache + RATIO * n + o;
        float sum = 0.0f;
        for (int f = 0; f < factors; f++) {  /* log pi: the sticks' cumulative sum, in order */
            sum += ratio[f] < log_v_min ? log_v_min : ratio[f];
            p[f] = sum < log_p_min ? log_p_min : sum;
        }
        #pragma omp simd
        for (int f = 0; f < factors; f++) p[f] = expf(p[f]);
    }
}

/* Gradients of NLL + k KL in the stored parameters, into `out` (3 planes of C*F, contiguous),
 * given g_b = dNLL/db; then, where m (and v: Adam's moments, laid out as `sel`) are given, an
 * Adam step of the parameters with this step's constants `adam`, else where lr > 0 an SGD
 * step at that rate. `scratch` holds C*F floats. */
void selection_backward(int clients, int factors, float *sel, long plane, const float *g_b,
                        const float *cache, const float *tau, const float *k, const uint8_t *tuning,
                        float scale, float kappa, float alpha, int concrete, float logit_max,
                        float prob_eps, float log_v_min, float lr, const float *adam, float *m, float *v,
                        float *out, float *scratch) {
    long n = (long)clients * factors;
    for (int c = 0; c < clients; c++) {
        const float *s0 = sel + (long)c * factors, *s1 = s0 + plane, *s2 = s1 + plane;
        long o = (long)c * factors;
        float kc = k[c], tc = tau[c];
        int tun = tuning[c];
        float *g_pp = scratch + o;
        #pragma omp simd
        for (int f = 0; f < factors; f++) {
            float s = s0[f] * scale;
            float q = clampf(s, -logit_max, logit_max);
            float relaxed = cache[RELAXED * n + o + f];
            float g_q = tun ? 0.0f : g_b[o + f] * relaxed * (1.0f - relaxed) / tc;
            float p = cache[P * n + o + f];
            float p_c = clampf(p, prob_eps, 1.0f - prob_eps);
            float p_logit = logf(p_c / (1.0f - p_c));
            float gp;
            if (concrete) {  /* dKL/dq = k (1 - 2 s_p) = -dKL/dp_logit */
                float m = kc - 2.0f * kc * sigmoidf(p_logit - cache[QN * n + o + f]);
                g_q += m;
                gp = m / (p_c - 1.0f);
            } else {  /* the exact Bernoulli KL given v */
                float pq = sigmoidf(q);
                g_q += kc * ((q - p_logit) * pq * (1.0f - pq));
                gp = kc * (sigmoidf(p_logit) - pq) / (1.0f - p_c);
            }
            float pi = sigmoidf(q);
            g_q += (tun && pi >= kappa) ? g_b[o + f] * pi * (1.0f - pi) : 0.0f;
            out[o + f] = (q == s ? g_q : 0.0f) * scale;
            g_pp[f] = p_c == p ? gp : 0.0f;
        }
        float acc = 0.0f;
        for (int f = factors - 1; f >= 0; f--) {  /* back through the cumulative sum */
            acc += g_pp[f];
            g_pp[f] = acc;
        }
        #pragma omp simd
        for (int f = 0; f < factors; f++) {
            float ratio = cache[RATIO * n + o + f], inner = cache[INNER * n + o + f];
            float cc = cache[CC * n + o + f], dd = cache[DD * n + o + f];
            float g_lv = ratio >= log_v_min ? g_pp[f] : 0.0f;
            float g_inner = inner >= INNER_MIN ? g_lv / (cc * inner) : 0.0f;
            float inv_c = 1.0f / cc, inv_d = 1.0f / dd;
            float kl_c = 1.0f - alpha * (digammaf(dd) + inv_d + EULER) * inv_c;
            float kl_d = (1.0f - inv_d) + (1.0f - alpha * inv_c) * (inv_d - dd * trigammaf(dd));
            float g_c = kc * kl_c - g_lv * ratio;
            float g_d = kc * kl_d + g_inner * (1.0f - inner) * cache[T * n + o + f];
            float l1 = s1[f] * scale, l2 = s2[f] * scale;
            out[n + o + f] = (l1 >= -LOG_CD_MAX && l1 <= LOG_CD_MAX ? g_c : 0.0f) * scale;
            out[2 * n + o + f] = (l2 >= -LOG_CD_MAX && l2 <= LOG_CD_MAX ? g_d : 0.0f) * scale;
        }
        if (m) {  /* Adam, as fedattack.optim steps it: adam = lr / bias1, 1 - beta1, beta2, 1 - beta2,
                   * sqrt(bias2), eps for this step */
            for (int q = 0; q < 3; q++) {
                float *pq = sel + q * plane + o, *mq = m + q * plane + o, *vq = v + q * plane + o;
                const float *gq = out + q * n + o;
                #pragma omp simd
                for (int f = 0; f < factors; f++) {
                    float g = gq[f];
                    mq[f] += adam[1] * (g - mq[f]);
                    vq[f] = vq[f] * adam[2] + adam[3] * g * g;
                    pq[f] -= adam[0] * mq[f] / (sqrtf(vq[f]) / adam[4] + adam[5]);
                }
            }
        } else if (lr > 0.0f) {  /* SGD on the stored parameters, once this client's gradients are taken */
            float *t0 = sel + o, *t1 = t0 + plane, *t2 = t1 + plane;
            #pragma omp simd
            for (int f = 0; f < factors; f++) {
                t0[f] -= lr * out[o + f];
                t1[f] -= lr * out[n + o + f];
                t2[f] -= lr * out[2 * n + o + f];
            }
        }
    }
}

/* ReLU forward (act = max(z, 0)) and backward (grad = below where z > 0, else 0), n values. */
void relu_forward(long n, const float *z, float *act) {
    #pragma omp simd
    for (long i = 0; i < n; i++) act[i] = z[i] > 0.0f ? z[i] : 0.0f;
}

void relu_backward(long n, const float *below, const float *z, float *grad) {
    #pragma omp simd
    for (long i = 0; i < n; i++) grad[i] = z[i] > 0.0f ? below[i] : 0.0f;
}

/* Through g = h diag(r b): g_rb = sum over the batch of d_g * h (C, F), d_g scaled by rb in
 * place (it becomes d_h), g_b = g_rb * r, the selection's dNLL/db, and r's gradient g_rb * b:
 * r stepped by SGD at lr_r after g_b is taken, or the gradient written to g_r where given. */
void lowrank_backward(int clients, int batch, int factors, float *d_g, const float *h, const float *rb,
                      float *r, const float *b, float lr_r, float *g_r, float *g_rb, float *g_b) {
    for (int c = 0; c < clients; c++) {
        long o = (long)c * factors;
        float *acc = g_rb + o;
        const float *rbc = rb + o;
        for (int f = 0; f < factors; f++) acc[f] = 0.0f;
        for (int i = 0; i < batch; i++) {
            float *dg = d_g + ((long)c * batch + i) * factors;
            const float *hh = h + ((long)c * batch + i) * factors;
            #pragma omp simd
            for (int f = 0; f < factors; f++) {
                acc[f] += dg[f] * hh[f];
                dg[f] *= rbc[f];
            }
        }
        #pragma omp simd
        for (int f = 0; f < factors; f++) g_b[o + f] = acc[f] * r[o + f];
        if (g_r) {
            #pragma omp simd
            for (int f = 0; f < factors; f++) g_r[o + f] = acc[f] * b[o + f];
        } else {
            #pragma omp simd
            for (int f = 0; f < factors; f++) r[o + f] -= lr_r * (acc[f] * b[o + f]);
        }
    }
}

/* A step's batch: rows of the raw inputs x (d values each, `channels` planes of d / channels),
 * normalised per channel as (x - mean) / std and written with a trailing 1 when `ones` (the
 * column W_a's bias row multiplies) into out (n_rows, d + ones): the gather, the normalisation
 * and the padding in one pass, instead of normalising and padding the round's whole input. */
void gather_normalized(long n_rows, long d, int channels, const float *x, const int64_t *rows,
                       const float *mean, const float *std, int ones, float *out) {
    long plane = d / channels, width = d + ones;
    for (long r = 0; r < n_rows; r++) {
        const float *src = x + rows[r] * d;
        float *dst = out + r * width;
        for (int ch = 0; ch < channels; ch++) {
            float m = mean[ch], s = std[ch];
            const float *sp = src + ch * plane;
            float *dp = dst + ch * plane;
            #pragma omp simd
            for (long j = 0; j < plane; j++) dp[j] = (sp[j] - m) / s;
        }
        if (ones) dst[d] = 1.0f;
    }
}

/* Into g = h diag(r b): rb = r * b (C, F) and g = h * rb (C, B, F), in one pass. */
void lowrank_forward(int clients, int batch, int factors, const float *h, const float *r, const float *b,
                     float *rb, float *g) {
    for (int c = 0; c < clients; c++) {
        float *rbc = rb + (long)c * factors;
        #pragma omp simd
        for (int f = 0; f < factors; f++) rbc[f] = r[(long)c * factors + f] * b[(long)c * factors + f];
        for (int i = 0; i < batch; i++) {
            const float *hh = h + ((long)c * batch + i) * factors;
            float *gg = g + ((long)c * batch + i) * factors;
            #pragma omp simd
            for (int f = 0; f < factors; f++) gg[f] = hh[f] * rbc[f];
        }
    }
}

/* The output layer and the loss, forward and backward, client by client: logits = relu(z) W^T
 * + bias, the loss gradient in them (softmax * w + neg_target, neg_target = -onehot * w), the
 * gradient passed below (logits' gradient @ W, before W steps, through the ReLU: zero where
 * z <= 0), then W and bias stepped by SGD at their learning rates, or, where g_weight or g_bias
 * is given, their gradients written there instead. z, act (scratch), below: (C, B, d); weight
 * (C, K, d); bias (C, K); logits (scratch, then the loss gradient): (C, B, K); w: (C, B). */
void dense_head(int clients, int batch, int d, int classes, const float *z, float *act, float *weight,
                float *bias, const float *neg_target, const float *w, float lr_weight, float lr_bias,
                float *g_weight, float *g_bias, float *logits, float *below) {
    float row[d];
    for (int c = 0; c < clients; c++) {
        long in = (long)c * batch * d, out = (long)c * batch * classes;
        const float *restrict zc = z + in;
        float *restrict ac = act + in, *restrict gl = logits + out;
        float *restrict wc = weight + (long)c * classes * d, *restrict biasc = bias + (long)c * classes;
        #pragma omp simd
        for (long i = 0; i < (long)batch * d; i++) ac[i] = zc[i] > 0.0f ? zc[i] : 0.0f;
        for (int b = 0; b < batch; b++) {
            const float *restrict ab = ac + (long)b * d;
            float *restrict l = gl + (long)b * classes;
            int k = 0;
            for (; k + 1 < classes; k += 2) {  /* two classes a pass: two chains of FMAs in flight */
                const float *restrict w0 = wc + (long)k * d, *restrict w1 = w0 + d;
                float s0 = 0.0f, s1 = 0.0f;
                #pragma omp simd reduction(+ : s0, s1)
                for (int j = 0; j < d; j++) {
                    s0 += ab[j] * w0[j];
                    s1 += ab[j] * w1[j];
                }
                l[k] = s0 + biasc[k];
                l[k + 1] = s1 + biasc[k + 1];
            }
            for (; k < classes; k++) {
                const float *restrict wk = wc + (long)k * d;
                float s = 0.0f;
                #pragma omp simd reduction(+ : s)
                for (int j = 0; j < d; j++) s += ab[j] * wk[j];
                l[k] = s + biasc[k];
            }
            float top = l[0], sum = 0.0f;
            for (int k = 1; k < classes; k++) top = l[k] > top ? l[k] : top;
            for (int k = 0; k < classes; k++) {
                l[k] = expf(l[k] - top);
                sum += l[k];
            }
            float scale = w[(long)c * batch + b] / sum;
            const float *restrict nt = neg_target + out + (long)b * classes;
            for (int k = 0; k < classes; k++) l[k] = nt[k] + l[k] * scale;
            float *restrict bb = below + in + (long)b * d;
            const float *restrict zb = zc + (long)b * d;
            #pragma omp simd
            for (int j = 0; j < d; j++) row[j] = 0.0f;
            for (int k = 0; k < classes; k++) {
                const float *restrict wk = wc + (long)k * d;
                float gk = l[k];
                #pragma omp simd
                for (int j = 0; j < d; j++) row[j] += gk * wk[j];
            }
            #pragma omp simd
            for (int j = 0; j < d; j++) bb[j] = zb[j] > 0.0f ? row[j] : 0.0f;
        }
        for (int k = 0; k < classes; k++) {
            float gb = 0.0f;
            for (int b = 0; b < batch; b++) gb += gl[(long)b * classes + k];
            if (g_bias) g_bias[(long)c * classes + k] = gb;
            else biasc[k] -= lr_bias * gb;
            #pragma omp simd
            for (int j = 0; j < d; j++) row[j] = 0.0f;
            for (int b = 0; b < batch; b++) {
                const float *restrict ab = ac + (long)b * d;
                float g = gl[(long)b * classes + k];
                #pragma omp simd
                for (int j = 0; j < d; j++) row[j] += g * ab[j];
            }
            float *restrict wk = wc + (long)k * d;
            if (g_weight) {
                float *restrict gw = g_weight + ((long)c * classes + k) * d;
                #pragma omp simd
                for (int j = 0; j < d; j++) gw[j] = row[j];
            } else {
                #pragma omp simd
                for (int j = 0; j < d; j++) wk[j] -= lr_weight * row[j];
            }
        }
    }
}
