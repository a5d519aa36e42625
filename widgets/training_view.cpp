#include "training_view.h"

#include <QChart>
#include <QCoreApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QPen>
#include <QPointer>
#include <QPushButton>
#include <QScatterSeries>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace bitlens::widgets {

namespace {

QString lossTitle(const std::string& lossName)
{
    if (lossName == "kl_distill")
        return QObject::tr("KL to float model (nats)");
    if (lossName == "mse_distill")
        return QObject::tr("MSE to float model");
    return QObject::tr("Cross-entropy (nats)");
}

bool isTop1(const std::string& metricName) { return metricName != "output_sqnr_db"; }

QString metricAxisTitle(const std::string& metricName)
{
    return isTop1(metricName) ? QObject::tr("Top-1 accuracy (%)")
                              : QObject::tr("Output SQNR vs float (dB)");
}

} // namespace

TrainingChart::TrainingChart(QWidget* parent) : ChartBase(parent) {}

void TrainingChart::reset(const QString& title, const QString& yTitle, std::int64_t steps)
{
    clearChart();
    setChartTitle(title);
    m_axisX = addValueAxis(tr("Optimizer step"), Qt::AlignBottom);
    m_axisY = addValueAxis(yTitle, Qt::AlignLeft);
    m_xHi = static_cast<double>(std::max<std::int64_t>(1, steps));
    setRoundTicks(m_axisX, 0.0, m_xHi, 8);
    m_yLo = std::numeric_limits<double>::infinity();
    m_yHi = -std::numeric_limits<double>::infinity();
    setRoundTicks(m_axisY, 0.0, 1.0, 5);
    markHasData();
}

QLineSeries* TrainingChart::addLine(const QString& name, int color)
{
    auto* series = new QLineSeries;
    series->setName(name);
    QPen pen(chartColor(color));
    pen.setWidthF(1.6);
    series->setPen(pen);
    chart()->addSeries(series);
    series->attachAxis(m_axisX);
    series->attachAxis(m_axisY);
    return series;
}

QScatterSeries* TrainingChart::addMarkers(const QString& name, int color, double size)
{
    auto* series = new QScatterSeries;
    series->setName(name);
    series->setColor(chartColor(color));
    series->setBorderColor(chartColor(color).darker(140));
    series->setMarkerSize(size);
    chart()->addSeries(series);
    series->attachAxis(m_axisX);
    series->attachAxis(m_axisY);
    return series;
}

void TrainingChart::includeValue(double value)
{
    if (!std::isfinite(value) || !m_axisY)
        return;
    if (value >= m_yLo && value <= m_yHi)
        return;
    m_yLo = std::min(m_yLo, value);
    m_yHi = std::max(m_yHi, value);
    const double span = std::max(m_yHi - m_yLo, std::max(1e-3, std::abs(m_yHi) * 0.02));
    setRoundTicks(m_axisY, m_yLo - 0.05 * span, m_yHi + 0.05 * span, 6);
}

void TrainingChart::includeStep(std::int64_t step)
{
    if (!m_axisX || static_cast<double>(step) <= m_xHi)
        return;
    m_xHi = static_cast<double>(step);
    setRoundTicks(m_axisX, 0.0, m_xHi, 8);
}

TrainingView::TrainingView(QWidget* parent)
    : QWidget(parent), m_lossChart(new TrainingChart), m_metricChart(new TrainingChart),
      m_status(new QLabel), m_stopButton(new QPushButton(tr("Stop (keep best)")))
{
    setObjectName(QStringLiteral("trainingView"));
    m_lossChart->setObjectName(QStringLiteral("trainingLossChart"));
    m_metricChart->setObjectName(QStringLiteral("trainingMetricChart"));
    m_stopButton->setObjectName(QStringLiteral("trainingStop"));
    m_stopButton->setToolTip(tr("End training at the next step and keep the best checkpoint "
                                "so far; it is then analysed like any run"));
    m_stopButton->setEnabled(false);
    m_status->setWordWrap(true);
    m_status->setText(tr("No training run yet: choose a qat-* scheme (qat-int8, qat-w4a8) and "
                         "press Run. Curves appear here while the model trains."));
    m_lossChart->showEmpty(tr("No training run yet"));
    m_metricChart->showEmpty(tr("No training run yet"));
    auto* top = new QHBoxLayout;
    top->addWidget(m_status, 1);
    top->addWidget(m_stopButton);
    auto* charts = new QHBoxLayout;
    charts->addWidget(m_lossChart, 1);
    charts->addWidget(m_metricChart, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addLayout(charts, 1);
    connect(m_stopButton, &QPushButton::clicked, this, [this] {
        if (stopTraining())
            Q_EMIT stopRequested();
    });
}

std::function<void(const TrainingPoint&)> TrainingView::begin(const QString& scheme)
{
    const quint64 generation = ++m_generation;
    m_stop = CancelToken();
    m_scheme = scheme;
    m_training = true;
    m_live = true;
    m_setUp = false;
    m_points = 0;
    m_bestStep = -1;
    m_loss = m_lossSmooth = m_metric = nullptr;
    m_best = nullptr;
    m_lossChart->showEmpty(tr("Calibrating %1…").arg(scheme));
    m_metricChart->showEmpty(tr("Calibrating %1…").arg(scheme));
    m_status->setText(tr("%1: calibrating the starting point…").arg(scheme));
    m_stopButton->setEnabled(true);
    QPointer<TrainingView> self(this);
    // Runs on the worker: post to the GUI thread (the application object outlives every view)
    // and drop the point there when the view is gone or a newer run has begun.
    return [self, generation](const TrainingPoint& point) {
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, generation, point] {
                if (self && self->m_generation == generation && self->m_training)
                    self->addPoint(point);
            },
            Qt::QueuedConnection);
    };
}

bool TrainingView::stopTraining()
{
    if (!isTraining())
        return false;
    m_stop.cancel();
    m_stopButton->setEnabled(false);
    m_status->setText(tr("%1: stopping at the next step; the best checkpoint so far is kept "
                         "and analysed…")
                          .arg(m_scheme));
    return true;
}

void TrainingView::finish(const QString& message)
{
    if (!m_training)
        return;
    m_training = false;
    m_stopButton->setEnabled(false);
    m_status->setText(message);
}

void TrainingView::setUp(const QString& /*scheme: the status line names it*/, std::int64_t steps,
                         const std::string& lossName, const std::string& metricName)
{
    m_metricName = metricName;
    m_lossChart->reset(tr("Training loss"), lossTitle(lossName), steps);
    m_loss = m_lossChart->addLine(tr("loss per step"), 5);
    m_lossSmooth = m_lossChart->addLine(tr("moving average (20 steps)"), 0);
    m_metricChart->reset(tr("Quantized model on held-out data"), metricAxisTitle(metricName),
                         steps);
    m_metric = m_metricChart->addLine(
        isTop1(metricName) ? tr("held-out top-1") : tr("held-out output SQNR"), 2);
    m_metric->setPointsVisible(true);
    m_best = m_metricChart->addMarkers(tr("best checkpoint (kept)"), 3, 13.0);
    m_setUp = true;
}

double TrainingView::metricValue(double raw) const
{
    return isTop1(m_metricName) ? 100.0 * raw : raw;
}

void TrainingView::markBest(std::int64_t step, double raw)
{
    m_bestStep = step;
    m_bestRaw = raw;
    m_best->clear();
    m_best->append(static_cast<double>(step), metricValue(raw));
}

void TrainingView::addPoint(const TrainingPoint& point)
{
    if (!m_setUp)
        setUp(m_scheme, point.steps, point.lossName, point.metricName);
    ++m_points;
    const double x = static_cast<double>(point.step);
    if (std::isfinite(point.loss)) {
        m_smoothed = m_lossSmooth->count() == 0 ? point.loss
                                                 : m_smoothed + (point.loss - m_smoothed) / 20.0;
        m_loss->append(x, point.loss);
        m_lossSmooth->append(x, m_smoothed);
        m_lossChart->includeValue(point.loss);
    }
    if (point.hasMetric) {
        m_metric->append(x, metricValue(point.metric));
        m_metricChart->includeValue(metricValue(point.metric));
        if (m_bestStep < 0 || point.metric > m_bestRaw)
            markBest(point.step, point.metric);
    }
    const QString metricText =
        isTop1(m_metricName) ? QString::number(100.0 * point.bestMetric, 'f', 2) + QLatin1String(" %")
                             : QString::number(point.bestMetric, 'f', 1) + QLatin1String(" dB");
    m_status->setText(
        point.step == 0
            ? tr("%1: calibrated start, held-out %2 — training %3 steps…")
                  .arg(m_scheme, metricText)
                  .arg(point.steps)
            : tr("%1: epoch %2/%3, step %4/%5, loss %6, lr %7 — best held-out %8")
                  .arg(m_scheme)
                  .arg(point.epoch)
                  .arg(point.epochs)
                  .arg(point.step)
                  .arg(point.steps)
                  .arg(point.loss, 0, 'f', 4)
                  .arg(point.lr, 0, 'g', 3)
                  .arg(metricText));
}

void TrainingView::setReport(const nlohmann::json& report)
{
    if (!report.is_object() || !report.contains("qat") || !report["qat"].is_object())
        return;
    const nlohmann::json& q = report["qat"];
    const QString scheme =
        report.contains("scheme") && report["scheme"].is_object()
            ? QString::fromStdString(report["scheme"].value("spec", std::string("qat")))
            : QStringLiteral("qat");
    const bool wasLive = m_live && m_training;
    m_training = false;
    m_stopButton->setEnabled(false);
    if (!wasLive) {
        // A saved report (or a history row): draw its recorded curves.
        m_live = false;
        ++m_generation;
        m_scheme = scheme;
        m_points = 0;
        m_bestStep = -1;
        const std::int64_t steps = q.value("steps", std::int64_t{0});
        setUp(scheme, steps, q.value("loss", std::string("cross_entropy")),
              q.value("metric", std::string("top1")));
        const auto curve = [&](const char* key, auto add) {
            if (!q.contains(key) || !q[key].is_object())
                return;
            const nlohmann::json& c = q[key];
            if (!c.contains("step") || !c.contains("value"))
                return;
            const std::size_t n = std::min(c["step"].size(), c["value"].size());
            for (std::size_t i = 0; i < n; ++i)
                if (c["step"][i].is_number() && c["value"][i].is_number())
                    add(c["step"][i].get<std::int64_t>(), c["value"][i].get<double>());
        };
        m_smoothed = 0.0;
        curve("loss_curve", [&](std::int64_t step, double v) {
            m_smoothed = m_lossSmooth->count() == 0 ? v : m_smoothed + (v - m_smoothed) / 20.0;
            m_loss->append(static_cast<double>(step), v);
            m_lossSmooth->append(static_cast<double>(step), m_smoothed);
            m_lossChart->includeValue(v);
            m_lossChart->includeStep(step);
            ++m_points;
        });
        curve("metric_curve", [&](std::int64_t step, double v) {
            m_metric->append(static_cast<double>(step), metricValue(v));
            m_metricChart->includeValue(metricValue(v));
            m_metricChart->includeStep(step);
        });
    }
    if (m_best && q.contains("best_metric") && q["best_metric"].is_number())
        markBest(q.value("best_step", std::int64_t{0}), q["best_metric"].get<double>());
    const double best = q.value("best_metric", 0.0);
    const QString metricText = isTop1(m_metricName)
                                   ? QString::number(100.0 * best, 'f', 2) + QLatin1String(" %")
                                   : QString::number(best, 'f', 1) + QLatin1String(" dB");
    const QString how = q.value("cancelled", false) ? tr("stopped after") : tr("trained");
    m_status->setText(tr("%1: %2 %3 steps (%4 epoch(s)) in %5 s; kept the checkpoint of step %6, "
                         "held-out %7 (start %8). The other tabs show this checkpoint.")
                          .arg(scheme, how)
                          .arg(q.value("steps", std::int64_t{0}))
                          .arg(q.value("epochs", 0))
                          .arg(q.value("seconds", 0.0), 0, 'f', 1)
                          .arg(q.value("best_step", std::int64_t{0}))
                          .arg(metricText)
                          .arg(isTop1(m_metricName)
                                   ? QString::number(100.0 * q.value("start_metric", 0.0), 'f', 2) +
                                         QLatin1String(" %")
                                   : QString::number(q.value("start_metric", 0.0), 'f', 1) +
                                         QLatin1String(" dB")));
}

QString TrainingView::statusText() const { return m_status->text(); }

} // namespace bitlens::widgets
