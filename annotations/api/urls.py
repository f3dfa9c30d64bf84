from django.urls import include, path
from rest_framework.routers import DefaultRouter

from annotations.api import (
    account,
    agreement,
    assignments,
    crowd,
    enrolment,
    exports,
    imports,
    labelstudio,
    protocols,
    quality,
    records,
    studies,
)
from annotations.api.sign_in import TokenView

router = DefaultRouter()
router.register("studies", studies.StudyViewSet, basename="study")
router.register("items", records.ItemViewSet, basename="item")
router.register("annotations", records.AnnotationViewSet, basename="annotation")
router.register("annotators", records.AnnotatorViewSet, basename="annotator")
router.register("exports", exports.ExportJobViewSet, basename="export")
router.register("imports", imports.ImportJobViewSet, basename="import")
router.register("assignments", assignments.MyAssignmentViewSet, basename="assignment")

urlpatterns = [
    path("studies/<int:pk>/agreement/", agreement.AgreementReportView.as_view(), name="api-agreement"),
    path("studies/<int:pk>/consensus/", agreement.ConsensusView.as_view(), name="api-consensus"),
    path("studies/<int:pk>/adjudication/", agreement.AdjudicationView.as_view(), name="api-adjudication"),
    path("studies/<int:pk>/share/", studies.StudyShareView.as_view(), name="api-study-share"),
    path(
        "studies/<int:pk>/enrollments/", enrolment.StudyEnrollmentView.as_view(), name="api-study-enrollments"
    ),
    path(
        "studies/<int:pk>/enrollments/unenroll/",
        enrolment.StudyUnenrollView.as_view(),
        name="api-study-unenroll",
    ),
    path(
        "studies/<int:pk>/enrollments/pool/",
        enrolment.StudyPoolEnrollView.as_view(),
        name="api-study-enroll-pool",
    ),
    path(
        "studies/<int:pk>/enrollments/bulk/",
        enrolment.StudyBulkEnrollView.as_view(),
        name="api-study-enroll-bulk",
    ),
    path("studies/<int:pk>/items/import/", imports.ItemImportView.as_view(), name="api-item-import"),
    path(
        "studies/<int:pk>/annotations/import/",
        imports.AnnotationImportView.as_view(),
        name="api-annotation-import",
    ),
    path(
        "studies/<int:pk>/features/import/", imports.FeatureImportView.as_view(), name="api-features-import"
    ),
    path("studies/<int:pk>/features/", exports.FeatureExportView.as_view(), name="api-features-export"),
    path(
        "studies/<int:pk>/labelstudio/import/",
        labelstudio.LabelStudioImportView.as_view(),
        name="api-labelstudio-import",
    ),
    path("studies/labelstudio/", labelstudio.LabelStudioCreateView.as_view(), name="api-labelstudio-create"),
    path("studies/<int:pk>/export/<str:fmt>/", exports.StudyExportView.as_view(), name="api-study-export"),
    path("exports/<int:pk>/download/", exports.ExportDownloadView.as_view(), name="api-export-download"),
    path("imports/<int:pk>/cancel/", imports.ImportJobCancelView.as_view(), name="api-import-cancel"),
    path("presets/", protocols.PresetListView.as_view(), name="api-presets"),
    path("presets/<str:key>/", protocols.PresetDetailView.as_view(), name="api-preset"),
    path("protocols/validate/", protocols.ProtocolValidateView.as_view(), name="api-protocol-validate"),
    path("me/", account.MeView.as_view(), name="api-me"),
    path("auth/token/", TokenView.as_view(), name="api-token"),
    path("studies/<int:pk>/assignments/next/", assignments.ClaimNextView.as_view(), name="api-claim-next"),
    path("assignments/<int:pk>/submit/", assignments.SubmitView.as_view(), name="api-assignment-submit"),
    path("assignments/<int:pk>/skip/", assignments.SkipView.as_view(), name="api-assignment-skip"),
    path("assignments/<int:pk>/release/", assignments.ReleaseView.as_view(), name="api-assignment-release"),
    path("studies/<int:pk>/invitations/", crowd.StudyInvitationsView.as_view(), name="api-study-invitations"),
    path(
        "studies/<int:pk>/invitations/<int:invitation_id>/revoke/",
        crowd.InvitationRevokeView.as_view(),
        name="api-invitation-revoke",
    ),
    path("studies/<int:pk>/payments/", crowd.StudyPaymentsView.as_view(), name="api-study-payments"),
    path("studies/<int:pk>/quality/", quality.QualityReportView.as_view(), name="api-quality"),
    path(
        "studies/<int:pk>/quality/settings/",
        quality.QualitySettingsView.as_view(),
        name="api-quality-settings",
    ),
    path("studies/<int:pk>/controls/import/", quality.ControlImportView.as_view(), name="api-control-import"),
    path("studies/<int:pk>/exclusions/", quality.ExclusionListView.as_view(), name="api-exclusions"),
    path(
        "studies/<int:pk>/exclusions/<int:annotator_id>/reinstate/",
        quality.ExclusionReinstateView.as_view(),
        name="api-exclusion-reinstate",
    ),
    path("items/<int:pk>/control/", quality.ItemControlView.as_view(), name="api-item-control"),
    path("", include(router.urls)),
]
